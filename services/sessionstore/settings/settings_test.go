package settings

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

func newStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := New(Config{DataDir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func field(t *testing.T, doc protocol.SettingsDoc, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc.Doc, &m); err != nil {
		t.Fatal(err)
	}
	return string(m[name])
}

// A patch keeps the fields it does not name (the operator's apiKeys
// included), writes 0600 atomically, and a hand edit is seen.
func TestPatchKeepsOtherFieldsAndSeesHandEdits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(`{"apiKeys":["k"],"prices":{"m":{"input":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, dir)
	doc, err := s.Patch(protocol.SettingsPatch{Set: map[string]json.RawMessage{"defaultModel": json.RawMessage(`"gpt-4o"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if field(t, doc, "defaultModel") != `"gpt-4o"` || field(t, doc, "apiKeys") != `["k"]` {
		t.Fatalf("doc %s", doc.Doc)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", info.Mode().Perm())
	}
	// A hand edit (a different size) is read on the next Get.
	if err := os.WriteFile(path, []byte(`{"defaultModel":"local-llama"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	_ = os.Chtimes(path, later, later)
	doc, err = s.Get()
	if err != nil || field(t, doc, "defaultModel") != `"local-llama"` {
		t.Fatalf("after edit: %s %v", doc.Doc, err)
	}
}

// A broken hand edit keeps the last good settings, names the line and
// column, and a patch is refused instead of overwriting the edit.
func TestBadEditKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	s := newStore(t, dir)
	if _, err := s.Patch(protocol.SettingsPatch{Set: map[string]json.RawMessage{"budgetModel": json.RawMessage(`"small"`)}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{\n  \"budgetModel\": \"small\",\n  oops\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := s.Get()
	if err != nil {
		t.Fatal(err)
	}
	if field(t, doc, "budgetModel") != `"small"` || !strings.Contains(doc.Error, "line 3") {
		t.Fatalf("doc %s error %q", doc.Doc, doc.Error)
	}
	_, err = s.Patch(protocol.SettingsPatch{Set: map[string]json.RawMessage{"budgetModel": json.RawMessage(`"other"`)}})
	if protocol.KindOf(err) != protocol.Conflict {
		t.Fatalf("patch over a broken file: %v", err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "oops") {
		t.Fatal("the hand edit was overwritten")
	}
}

func TestCheckRefusesUnknownAndMistyped(t *testing.T) {
	for _, p := range []protocol.SettingsPatch{
		{},
		{Set: map[string]json.RawMessage{"apiKeys": json.RawMessage(`["x"]`)}},
		{Set: map[string]json.RawMessage{"mcpServers": json.RawMessage(`{}`)}},
		{Set: map[string]json.RawMessage{"dailyBudget": json.RawMessage(`-1`)}},
		{Set: map[string]json.RawMessage{"budgetThreshold": json.RawMessage(`2`)}},
		{Set: map[string]json.RawMessage{"defaultModel": json.RawMessage(`""`)}},
		{Set: map[string]json.RawMessage{"permissions": json.RawMessage(`{"defaultAutonomy":"root"}`)}},
		{Remove: []string{"apiKeys"}},
	} {
		if err := Check(p); protocol.KindOf(err) != protocol.Invalid {
			t.Errorf("%+v: %v", p, err)
		}
	}
	ok := protocol.SettingsPatch{Set: map[string]json.RawMessage{
		"permissions": json.RawMessage(`{"defaultAutonomy":"trusted","externalGates":[],"workspaceOverrides":{}}`),
		"dailyBudget": json.RawMessage(`5`)}, Remove: []string{"fallbackModel"}}
	if err := Check(ok); err != nil {
		t.Fatal(err)
	}
}
