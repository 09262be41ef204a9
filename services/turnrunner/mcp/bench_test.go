package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/services/turnrunner/mcp/mcptest"
)

// BenchmarkCall is one echo call's round trip through the manager, over
// each transport; BenchmarkBind is a turn's binding of two servers' tools.
func BenchmarkCall(b *testing.B) {
	dir := b.TempDir()
	remote := mcptest.NewHTTP()
	b.Cleanup(remote.Close)
	writeConfig(b, dir, map[string]any{
		"local":  stdioEntry(filepath.Join(dir, "rec"), nil),
		"remote": map[string]any{"url": remote.URL()},
	})
	m := New(Config{DataDir: dir}, nil, quietLog())
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Stop(context.Background()) })
	set := m.Bind(context.Background(), "", nil)
	for _, server := range []string{"local", "remote"} {
		b.Run(server, func(b *testing.B) {
			var tool *Tool
			for _, tl := range set.Tools() {
				if tl.Name() == "mcp__"+server+"__echo" {
					tool = tl
				}
			}
			args := json.RawMessage(`{"text":"x"}`)
			for b.Loop() {
				if _, err := tool.Call(context.Background(), args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("bind", func(b *testing.B) {
		for b.Loop() {
			if n := len(m.Bind(context.Background(), "", nil).Tools()); n != 16 {
				b.Fatalf("%d tools", n)
			}
		}
	})
}
