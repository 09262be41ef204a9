package sessionstore

import (
	"flag"
	"strings"
	"testing"
)

// TestConfigFlagsValidate: Validate judges the settings alone (no data
// dir needed, nothing filled in), as the composition root calls it while
// parsing flags.
func TestConfigFlagsValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"zero value", Config{}, ""},
		{"jsonl", Config{Store: StoreJSONL}, ""},
		{"postgres", Config{Store: StorePostgres, PostgresURL: "postgres://x"}, ""},
		{"postgres without URL", Config{Store: StorePostgres}, "--store=postgres needs --postgres-url"},
		{"unknown store", Config{Store: "mysql"}, `--store must be "jsonl" or "postgres", not "mysql"`},
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
	var flags Config
	flags.RegisterFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	if flags.Store != StoreJSONL || flags.PostgresURL != "" {
		t.Errorf("flag defaults %+v", flags)
	}
}
