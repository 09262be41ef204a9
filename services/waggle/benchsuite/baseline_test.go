package benchsuite

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestTurnBaselineIsADurableTurn: the whole-turn baseline streams the
// stub's answer as token events and a done event, and leaves the user
// message and the reply in the session's file, as the server must.
func TestTurnBaselineIsADurableTurn(t *testing.T) {
	stub := StartStub()
	defer stub.Close()
	dir := t.TempDir()
	base, err := startTurnBaseline(dir, stub.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	for range 2 {
		tr, err := ChatTurn(context.Background(), newClient(4), base.URL, "hi there", "s1", traceOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Terminal != "done" || tr.Bytes != 5*len("tok ") || tr.DoneBytes != tr.Bytes || tr.Events != 5 {
			t.Fatalf("turn: %+v", tr)
		}
	}
	f, err := os.Open(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct{ Role, Content string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"user:hi there", "assistant:tok tok tok tok tok ", "user:hi there", "assistant:tok tok tok tok tok "}
	if len(got) != len(want) {
		t.Fatalf("file holds %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("file holds %q, want %q", got, want)
		}
	}
}
