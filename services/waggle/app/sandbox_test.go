package app

import (
	"os/exec"
	"strings"
	"testing"
)

func TestBashSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
	tests := []struct {
		auth, bash, sandbox string
		want                bool
	}{
		{"local", "auto", "auto", false},    // desktop: bash runs directly
		{"local", "auto", "on", true},       // asked for
		{"required", "auto", "auto", false}, // team server: bash off, nothing to sandbox
		{"required", "true", "auto", true},  // team server with bash: sandboxed
		{"required", "true", "off", false},  // operator's explicit choice
		{"required", "false", "on", false},  // no bash at all
	}
	for _, tt := range tests {
		got, err := bashSandbox(Config{Auth: tt.auth, EnableBash: tt.bash, BashSandbox: tt.sandbox})
		if err != nil || (got != "") != tt.want {
			t.Errorf("%+v: %q %v", tt, got, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := bashSandbox(Config{Auth: "required", EnableBash: "true", BashSandbox: "auto"}); err == nil || !strings.Contains(err.Error(), "bubblewrap") {
		t.Fatalf("missing bwrap: %v", err)
	}
}
