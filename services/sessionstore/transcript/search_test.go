package transcript

import (
	"reflect"
	"strings"
	"testing"
)

func TestSnippetWindow(t *testing.T) {
	tests := []struct {
		name, text, q, want string
	}{
		{"short text: no ellipses", "We need a database here", "database", "We need a database here"},
		{"case-insensitive, original case kept", "Pick a DataBase engine", "database", "Pick a DataBase engine"},
		{"prefix cut 40 before the hit",
			strings.Repeat("a", 50) + "database" + "tail",
			"database",
			"..." + strings.Repeat("a", 40) + "databasetail"},
		{"suffix cut 80 after the hit",
			"database" + strings.Repeat("b", 100),
			"database",
			"database" + strings.Repeat("b", 80) + "..."},
		{"both sides cut, newlines become spaces",
			strings.Repeat("x\n", 30) + "database" + strings.Repeat("\ny", 50),
			"database",
			"..." + strings.Repeat("x ", 20) + "database" + strings.Repeat(" y", 40) + "..."},
		{"window counted in UTF-16 units",
			strings.Repeat("😀", 25) + "database",
			"database",
			"..." + strings.Repeat("😀", 20) + "database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := snippet(tt.text, strings.ToLower(tt.q)); got != tt.want {
				t.Errorf("snippet = %q\nwant      %q", got, tt.want)
			}
		})
	}
}

func TestSearch(t *testing.T) {
	summaryMeta := `{"type":"meta","title":"Database Design","summary":"Chose a database schema","created":"c"}`
	var many []string
	for range 60 {
		many = append(many, msg("user", "filler", ""))
	}
	tests := []struct {
		name     string
		lines    []string
		q        string
		count    int
		snippets []Snippet
	}{
		{"title, summary, then messages", []string{summaryMeta, msg("user", "Which database should we use?", ""), msg("assistant", "Postgres is a solid database.", "")},
			"Database", 4, []Snippet{
				{"Database Design", "title"},
				{"Chose a database schema", "summary"},
				{"Which database should we use?", "user"},
			}},
		{"no match", []string{summaryMeta, msg("user", "hello", "")}, "quantum", 0, nil},
		{"a string title is searched", []string{`{"type":"meta","title":"quantum talk","created":"c"}`, msg("user", "hello", "")}, "quantum", 1, []Snippet{{"quantum talk", "title"}}},
		{"a title that is not a string is not", []string{`{"type":"meta","title":{"quantum":1},"created":"c"}`, msg("user", "hello", "")}, "quantum", 0, nil},
		{"at most 3 snippets, every hit counted", []string{metaLine,
			msg("user", "db 1", ""), msg("assistant", "db 2", ""), msg("user", "db 3", ""), msg("assistant", "db 4", ""), msg("user", "db 5", "")},
			"db", 5, []Snippet{{"db 1", "user"}, {"db 2", "assistant"}, {"db 3", "user"}}},
		{"only the first 50 message lines", append(append([]string{metaLine}, many...), msg("user", "needle", "")), "needle", 0, nil},
		{"malformed and tool lines are skipped", []string{metaLine, "needle {", `{"type":"tool","callId":"c","name":"x","result":"needle","isError":false,"status":"success","timestamp":"t"}`, msg("user", "a needle", "")},
			"needle", 1, []Snippet{{"a needle", "user"}}},
		{"empty contents never match", []string{metaLine, `{"role":"user","content":""}`}, "", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, snips := Search(Parse(jsonl(tt.lines...)), tt.q)
			if count != tt.count || !reflect.DeepEqual(snips, tt.snippets) {
				t.Errorf("Search = %d %+v\nwant     %d %+v", count, snips, tt.count, tt.snippets)
			}
		})
	}
}
