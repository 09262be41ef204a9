package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// newEnv returns an Env whose FilesDir does not exist yet (tools create it).
func newEnv(t *testing.T) Env {
	t.Helper()
	return Env{FilesDir: filepath.Join(t.TempDir(), "files"), Workspace: "ws1"}
}

// call runs the named tool of a default registry (bash enabled).
func call(t *testing.T, env Env, name string, input any) (string, error) {
	t.Helper()
	return callWith(t, DefaultConfig(), env, name, input)
}

func callWith(t *testing.T, cfg Config, env Env, name string, input any) (string, error) {
	t.Helper()
	return callCtx(t, context.Background(), cfg, env, name, input)
}

func callCtx(t *testing.T, ctx context.Context, cfg Config, env Env, name string, input any) (string, error) {
	t.Helper()
	tool, ok := NewRegistry(cfg).Get(name)
	if !ok {
		t.Fatalf("tool %q not registered", name)
	}
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return runTool(ctx, tool, env, raw)
}

// runTool decodes raw as tool's arguments and runs the call.
func runTool(ctx context.Context, tool Tool, env Env, raw json.RawMessage) (string, error) {
	c, err := tool.Decode(raw)
	if err != nil {
		return "", err
	}
	return c.Run(ctx, env)
}

// mustCall fails the test when the tool errors.
func mustCall(t *testing.T, env Env, name string, input any) string {
	t.Helper()
	out, err := call(t, env, name, input)
	if err != nil {
		t.Fatalf("%s(%v): unexpected error: %v", name, input, err)
	}
	return out
}

// writeTree creates files (relative path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
