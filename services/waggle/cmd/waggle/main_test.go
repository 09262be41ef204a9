package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServeConfigErrors: bad configuration is a clear message and a
// non-zero exit, never a panic or a stack trace.
func TestServeConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, []byte("x"), 0o644)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dataDir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"serve", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"bad duration", []string{"serve", "--echo-delay", "fast"}, 2, `invalid --echo-delay "fast": want a duration`},
		{"bad number", []string{"serve", "--max-message-length", "lots"}, 2, `invalid --max-message-length "lots": want a whole number`},
		{"bad target", []string{"serve", "--data-dir", dataDir, "--targets", "gateway,bogus"}, 1, `unknown target "bogus"`},
		{"unwritable data dir", []string{"serve", "--data-dir", filepath.Join(file, "sub")}, 1, "data directory"},
		{"port in use", []string{"serve", "--data-dir", dataDir, "--addr", busy.Addr().String()}, 1, "cannot listen on " + busy.Addr().String()},
		{"port in use, original's words", []string{"serve", "--data-dir", dataDir, "--addr", busy.Addr().String()}, 1,
			"Port " + strconv.Itoa(busy.Addr().(*net.TCPAddr).Port) + " is already in use. Another Waggle instance may be running.\nTo fix: close the other instance, or set WAGGLE_PORT=<port> to use a different port.\n" +
				"(--addr or WAGGLE_ADDR=host:port wins over WAGGLE_PORT when set: change that one instead.)"},
		{"bad llm url", []string{"serve", "--data-dir", dataDir, "--llm-url", "localhost:4000"}, 1, "must be an http(s) URL"},
		{"unknown command", []string{"fly"}, 2, `unknown command "fly"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			t.Setenv("WAGGLE_LOG_LEVEL", "error")
			code := run(tt.args, &out, &errOut)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, errOut.String())
			}
			if !strings.Contains(errOut.String()+out.String(), tt.want) {
				t.Fatalf("output %q does not contain %q", errOut.String(), tt.want)
			}
			if strings.Contains(errOut.String(), "goroutine ") || strings.Contains(errOut.String(), "panic") {
				t.Fatalf("stack trace in output: %s", errOut.String())
			}
		})
	}
}

func TestEnvAndFlagPrecedence(t *testing.T) {
	t.Setenv("WAGGLE_ADDR", "127.0.0.1:4444")
	t.Setenv("WAGGLE_ECHO_DELAY", "5ms")
	var out bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &out); code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, want := range []string{"WAGGLE_ADDR", "WAGGLE_DATA_DIR", "WAGGLE_LLM_URL", "WAGGLE_NATS_URL", "WAGGLE_TARGETS", "WAGGLE_MAX_MESSAGE_LENGTH", "WAGGLE_POSTGRES_URL", "WAGGLE_FRONTEND_DIR", "WAGGLE_HOST", "WAGGLE_PORT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}
