package gateway

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmprobe"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"zero value", Config{}, ""},
		{"no message limit", Config{MaxMessageLength: 0}, ""},
		{"message limit", Config{MaxMessageLength: 10}, ""},
		{"negative message limit", Config{MaxMessageLength: -1}, "--max-message-length"},
		{"local", Config{Auth: AuthLocal}, ""},
		{"required", Config{Auth: AuthRequired}, ""},
		{"unknown auth", Config{Auth: "open"}, `auth mode "open": want local or required`},
		{"origins", Config{AllowedOrigins: []string{"https://app.example.com", "http://localhost:4000/", "tauri://localhost"}}, ""},
		{"origin with a path", Config{AllowedOrigins: []string{"https://app.example.com/app"}}, "--allowed-origins"},
		{"origin wildcard", Config{AllowedOrigins: []string{"*"}}, "--allowed-origins"},
		{"origin without scheme", Config{AllowedOrigins: []string{"app.example.com"}}, "--allowed-origins"},
		{"negative body timeout", Config{BodyReadTimeout: -time.Second}, "--body-read-timeout"},
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

// TestConfigDefaults: the flags and a Config built by hand get the same
// defaults (each written once), except MaxMessageLength, whose zero value
// means no limit.
func TestConfigDefaults(t *testing.T) {
	var flags Config
	flags.RegisterFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	if flags.Addr != DefaultAddr || flags.MaxMessageLength != DefaultMaxMessageLength || flags.Auth != AuthLocal ||
		flags.RateLimit != 0 || flags.RateLimitChat != 120 || flags.RateWindow != time.Minute || flags.AllowedOrigins != nil {
		t.Errorf("flag defaults %+v", flags)
	}
	hand := Config{DataDir: t.TempDir(), Probe: llmprobe.Config{URL: "http://127.0.0.1:1/v1"}}
	if err := hand.prepare(); err != nil {
		t.Fatal(err)
	}
	if hand.Addr != flags.Addr || hand.Auth != flags.Auth || hand.RateLimitChat != flags.RateLimitChat || hand.RateWindow != flags.RateWindow ||
		hand.MaxMessageLength != 0 || hand.AllowedOrigins != nil || hand.BodyReadTimeout != flags.BodyReadTimeout || hand.Mode != "local" || hand.Token == "" {
		t.Errorf("hand-built defaults %+v", hand)
	}
	team := Config{DataDir: t.TempDir(), Probe: hand.Probe, Auth: AuthRequired}
	if err := team.prepare(); err != nil || team.Mode != "team" {
		t.Errorf("team mode: %v %q", err, team.Mode)
	}
	if l, on := team.limits(); !on || l.Limit != 100 || l.RouteLimits["/api/chat"] != 120 {
		t.Errorf("team rate limits %+v %v", l, on)
	}
}
