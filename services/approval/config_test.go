package approval

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"zero value", Config{}, ""},
		{"timeout", Config{Timeout: time.Second}, ""},
		{"negative timeout", Config{Timeout: -time.Second}, "--approval-timeout"},
		{"negative sweep", Config{SweepInterval: -time.Second}, "durations must not be negative"},
		{"negative retention", Config{Retention: -time.Second}, "durations must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.err == "" && err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	var flags Config
	flags.RegisterFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	hand := Config{DataDir: t.TempDir()}
	if err := hand.prepare(); err != nil {
		t.Fatal(err)
	}
	if flags.Timeout != protocol.DefaultApprovalTimeout || hand.Timeout != flags.Timeout || hand.SweepInterval != time.Second || hand.Bucket.Replicas != 1 {
		t.Errorf("flags %+v, hand-built %+v", flags, hand)
	}
	if err := (&Config{}).prepare(); err == nil {
		t.Error("no data dir accepted")
	}
}
