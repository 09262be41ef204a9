package workspaces

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Session Test WS":    "session-test-ws",
		"  Hello,  World!! ": "hello-world",
		"Ünïcode Café 2":     "n-code-caf-2",
		"!!!":                "workspace",
		"already-slug_ok":    "already-slug-ok",
		"Default Workspace":  "default-workspace",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
		if !protocol.ValidID(Slug(in)) {
			t.Errorf("Slug(%q) is not a valid id", in)
		}
	}
}

func raw(t *testing.T, v map[string]any) Doc {
	t.Helper()
	b, _ := json.Marshal(v)
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCreateCollisionGetListUpdateDelete(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	if err := s.EnsureDefault(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		d, err := s.Create(raw(t, map[string]any{"name": "Research", "group": "Team", "custom": map[string]any{"k": 1}}), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID())
	}
	if ids[0] != "research" || ids[1] != "research-2" || ids[2] != "research-3" {
		t.Fatalf("ids %v", ids)
	}
	d, err := s.Get("research")
	if err != nil {
		t.Fatal(err)
	}
	w := d.Workspace()
	if w.Name != "Research" || w.Group != "Team" || w.Created == "" || string(d["custom"]) != `{"k":1}` {
		t.Fatalf("get: %+v custom=%s", w, d["custom"])
	}
	list, _ := s.List()
	if len(list) != 4 || list[0].ID() != DefaultID {
		t.Fatalf("list: %d first %q", len(list), list[0].ID())
	}
	up, err := s.Update("research", raw(t, map[string]any{"model": "gpt-x", "group": nil, "id": "hijack", "budget": 2.5}))
	if err != nil {
		t.Fatal(err)
	}
	uw := up.Workspace()
	if uw.ID != "research" || uw.Model != "gpt-x" || uw.Group != "" || uw.Budget != 2.5 || string(up["custom"]) != `{"k":1}` {
		t.Fatalf("update: %+v", uw)
	}
	// Sessions live inside the workspace and go with it.
	os.MkdirAll(filepath.Join(dir, "workspaces", "research", "sessions"), 0o755)
	os.WriteFile(filepath.Join(dir, "workspaces", "research", "sessions", "s1.jsonl"), []byte("{}\n"), 0o644)
	removed, err := s.Delete("research")
	if err != nil || len(removed) != 1 || removed[0] != "s1" {
		t.Fatalf("delete: %v %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspaces", "research")); !os.IsNotExist(err) {
		t.Fatalf("directory left behind: %v", err)
	}
	if _, err := s.Get("research"); err != ErrNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := s.Delete("research"); err != ErrNotFound {
		t.Fatalf("second delete: %v", err)
	}
}

func TestValidation(t *testing.T) {
	s := New(t.TempDir())
	for _, body := range []map[string]any{{}, {"name": ""}, {"name": "  "}, {"name": 5}} {
		if _, err := s.Create(raw(t, body), nil); err != ErrNameRequired {
			t.Errorf("Create(%v) = %v, want name is required", body, err)
		}
	}
	for _, body := range []map[string]any{{"name": "x", "model": 3}, {"name": "x", "budget": "lots"}} {
		if _, err := s.Create(raw(t, body), nil); protocol.KindOf(err) != protocol.Invalid {
			t.Errorf("Create(%v) = %v, want 400", body, err)
		}
	}
	d, _ := s.Create(raw(t, map[string]any{"name": "ok"}), nil)
	if _, err := s.Update(d.ID(), raw(t, map[string]any{"name": ""})); err != ErrNameRequired {
		t.Errorf("rename to empty: %v", err)
	}
	if _, err := s.Update("missing", Doc{}); err != ErrNotFound {
		t.Errorf("update missing: %v", err)
	}
}

func TestEnsureDefaultKeepsExisting(t *testing.T) {
	s := New(t.TempDir())
	if err := s.EnsureDefault(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(DefaultID, raw(t, map[string]any{"name": "Renamed"})); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureDefault(); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Get(DefaultID)
	if d.Workspace().Name != "Renamed" {
		t.Fatalf("EnsureDefault overwrote the default workspace: %q", d.Workspace().Name)
	}
}
