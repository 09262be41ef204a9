package transcript

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fastCorpus covers what the fast paths must not get wrong: meta lines or
// not, tool lines (also escaped or mistyped), malformed and blank lines,
// escapes in content, non-ASCII text and sessions longer than the 50-line
// search window.
func fastCorpus() map[string][]byte {
	tool := toolLine("c1", "web_search", `{"query":"x"}`, "result about kubernetes", "success", "", false, 5)
	long := []string{metaLine}
	for i := range 70 {
		long = append(long, msg("user", fmt.Sprintf("line %d kubernetes", i), ""))
		if i%7 == 0 {
			long = append(long, tool)
		}
	}
	return map[string][]byte{
		"empty":               []byte("  \n\n"),
		"meta only":           jsonl(`{"type":"meta","title":"T","summary":"About Kubernetes","created":"2026-01-01T00:00:00.000Z"}`),
		"no meta":             jsonl(msg("user", "This is a fairly long first message that exceeds the fifty character limit", ""), msg("assistant", "kubernetes!", "")),
		"tool first":          jsonl(tool, msg("user", "after the tool", ""), msg("assistant", "KUBERNETES", "")),
		"escaped tool":        jsonl(metaLine, `{"type":"\u0074ool","name":"x"}`, msg("user", "hi kubernetes", "")),
		"mistyped tool":       jsonl(metaLine, `{"type":"tool","callId":5}`, msg("user", "kubernetes", "")),
		"malformed":           jsonl(metaLine, `{"role":"user","content":"kubernetes`, `not json`, `42`, msg("user", "kubernetes fine", "")),
		"malformed first":     jsonl(`{"role":`, msg("user", "second kubernetes", "")),
		"escapes":             jsonl(metaLine, `{"role":"user","content":"say \"Kubernetes\"\nnext / \\ done"}`, `{"role":"user","content":"caf\u00e9 kubernetes"}`),
		"unicode":             jsonl(metaLine, msg("user", "ΣΊΣΥΦΟΣ and İstanbul and \u212a kubernetes", ""), msg("assistant", "Straße", "")),
		"numeric content":     jsonl(metaLine, `{"role":"user","content":5}`, msg("user", "kubernetes", "")),
		"empty content first": jsonl(metaLine, `{"role":"user","content":""}`, msg("user", "kubernetes", "")),
		"meta later":          jsonl(msg("user", "x kubernetes", ""), `{"type":"meta","title":"late"}`),
		"long":                jsonl(long...),
		"crlf":                []byte(metaLine + "\r\n" + msg("user", "kubernetes crlf", "") + "\r\n"),
	}
}

func TestQuickInfoMatchesSessionInfo(t *testing.T) {
	mtime := time.Date(2026, 3, 19, 10, 0, 0, 0, time.UTC)
	for name, data := range fastCorpus() {
		want := SessionInfo("sid", Parse(data), mtime)
		got := QuickInfo("sid", data, mtime)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: QuickInfo = %+v, want %+v", name, got, want)
		}
	}
}

func TestSearchDataMatchesSearch(t *testing.T) {
	queries := []string{"kubernetes", "KUBERNETES", "line 6", "café", "straße", "σίσυφος", "i̇stanbul", "kelvin", "k", "\u212a", "about", `"kubernetes"`, "next / \\", "tool", "fine", "zz"}
	for name, data := range fastCorpus() {
		f := Parse(data)
		for _, q := range queries {
			wc, ws := Search(f, q)
			gc, gs := SearchData(data, q)
			if wc != gc || !reflect.DeepEqual(ws, gs) {
				t.Errorf("%s / %q: SearchData = %d %v, want %d %v", name, q, gc, gs, wc, ws)
			}
		}
	}
	if n, _ := SearchData(fastCorpus()["long"], "kubernetes"); n != 50 {
		t.Errorf("long session: %d hits, want the 50-line window", n)
	}
}
