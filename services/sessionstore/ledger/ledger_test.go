package ledger

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func open(t *testing.T, dir string) *Ledger {
	t.Helper()
	l, err := Open(Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLedgerTornTailRepaired(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir)
	if err := l.Record(protocol.UsageRecord{Model: "m", InputTokens: 4, OutputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, UsageFile)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"usage","model":"m","inputTok`)
	f.Close()
	l = open(t, dir)
	if err := l.Record(protocol.UsageRecord{Model: "m", InputTokens: 6, OutputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir)
	if s, err := l.Summary(""); err != nil || s.Turns != 2 || s.TotalInputTokens != 10 {
		t.Fatalf("after torn tail: %+v, %v", s, err)
	}
}

func TestDamagedStateIsTheDefaultModel(t *testing.T) {
	dir := t.TempDir()
	if _, err := open(t, dir).SetModel("gpt-5"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, StateFile), []byte("{not json"), 0o644)
	if m := open(t, dir).Model(); m != "claude-sonnet-4-6" {
		t.Fatalf("model with damaged state %q", m)
	}
}
