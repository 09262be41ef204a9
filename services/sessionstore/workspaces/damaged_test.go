package workspaces

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// A damaged workspace.json is reported (logged once, a clear error from
// Get and Update), skipped by List, never rewritten, and affects no other
// workspace.
func TestDamagedConfig(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"cut short", `{"id":"broken","name":"Broken","created":"2026-01-01T00:0`},
		{"garbage bytes", "\x00\x00\x00\x00"},
		{"a JSON array", `["not","an","object"]`},
		{"null", `null`},
		{"empty", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := New(t.TempDir())
			s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			good, err := s.Create(Doc{"name": jsonValue("Good")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(s.Dir("broken"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.file("broken"), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}

			for range 3 {
				_, err := s.Get("broken")
				if !errors.Is(err, ErrDamaged) {
					t.Fatalf("Get: %v, want ErrDamaged", err)
				}
				if e := protocol.AsError(err); e == nil || e.Kind != protocol.Internal || e.Code != "WORKSPACE_DAMAGED" ||
					strings.Contains(e.Message, "/") {
					t.Fatalf("client error %+v", e)
				}
			}
			if n := strings.Count(logs.String(), "workspace config is damaged"); n != 1 {
				t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
			}
			list, err := s.List()
			if err != nil || len(list) != 1 || list[0].ID() != good.ID() {
				t.Fatalf("List = %v, %v; want only %s", list, err, good.ID())
			}
			if _, err := s.Update("broken", Doc{"name": jsonValue("Fixed?")}); !errors.Is(err, ErrDamaged) {
				t.Fatalf("Update of a damaged config: %v", err)
			}
			if data, _ := os.ReadFile(s.file("broken")); string(data) != tc.content {
				t.Fatalf("damaged file rewritten: %q", data)
			}
			if _, err := s.Update(good.ID(), Doc{"name": jsonValue("Still good")}); err != nil {
				t.Fatalf("other workspace affected: %v", err)
			}
			// Restored by hand: served again.
			if err := os.WriteFile(s.file("broken"), []byte(`{"name":"Restored","created":"2026-01-01T00:00:00.000Z"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if d, err := s.Get("broken"); err != nil || d.str("name") != "Restored" {
				t.Fatalf("restored: %v %v", d, err)
			}
		})
	}
}
