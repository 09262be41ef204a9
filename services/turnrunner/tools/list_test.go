package tools

import (
	"fmt"
	"strings"
	"testing"
)

func sampleTree(t *testing.T, env Env) {
	t.Helper()
	writeTree(t, env.FilesDir, map[string]string{
		"README.md":            "# Project\nTODO: write docs\n",
		"src/main.go":          "package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n",
		"src/util/strings.go":  "package util\n// todo: more helpers\nfunc Upper(s string) string { return s }\n",
		"src/util/strings.txt": "plain\n",
		"docs/guide.md":        "Call foo(bar) to start.\n",
		".git/HEAD":            "ref: refs/heads/main TODO\n",
		"assets/logo.png":      "\x89PNG\x00\x00TODO",
	})
}

func TestListFiles(t *testing.T) {
	env := newEnv(t)
	sampleTree(t, env)

	got := mustCall(t, env, "list_files", map[string]any{})
	want := ".git/\nREADME.md\nassets/\ndocs/\nsrc/"
	if got != want {
		t.Errorf("list_files root =\n%s\nwant\n%s", got, want)
	}
	if got := mustCall(t, env, "list_files", map[string]any{"path": "src"}); got != "src/main.go\nsrc/util/" {
		t.Errorf("list_files src = %q", got)
	}
	got = mustCall(t, env, "list_files", map[string]any{"path": "src", "recursive": true})
	if got != "src/main.go\nsrc/util/\nsrc/util/strings.go\nsrc/util/strings.txt" {
		t.Errorf("recursive list = %q", got)
	}
	got = mustCall(t, env, "list_files", map[string]any{"recursive": "true"})
	if !strings.Contains(got, ".git/\n") || strings.Contains(got, ".git/HEAD") {
		t.Errorf("recursive list should show .git/ without descending: %q", got)
	}
	if _, err := call(t, env, "list_files", map[string]any{"path": "README.md"}); err == nil {
		t.Error("list_files on a file succeeded")
	}
}

func TestListFilesCap(t *testing.T) {
	env := newEnv(t)
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("d/f%02d.txt", i)] = "x"
	}
	writeTree(t, env.FilesDir, files)
	cfg := DefaultConfig()
	cfg.ListLimit = 10
	for _, recursive := range []bool{false, true} {
		got, err := callWith(t, cfg, env, "list_files", map[string]any{"path": "d", "recursive": recursive})
		if err != nil {
			t.Fatal(err)
		}
		body, note, ok := strings.Cut(got, "\n\n")
		if !ok || !strings.Contains(note, "truncated") {
			t.Errorf("recursive=%v: no truncation note in %q", recursive, got)
		}
		if n := len(strings.Split(body, "\n")); n != 10 {
			t.Errorf("recursive=%v: %d entries, want cap 10", recursive, n)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "src/util/strings.go", true}, // no slash: base name at any depth
		{"*.go", "src/util/strings.txt", false},
		{"src/*.go", "src/main.go", true},
		{"src/*.go", "src/util/strings.go", false},
		{"src/**/*.go", "src/main.go", true}, // ** matches zero directories
		{"src/**/*.go", "src/util/strings.go", true},
		{"**/util/*", "src/util/strings.txt", true},
		{"**", "a/b/c", true},
		{"src/**", "src/util/strings.go", true},
		{"docs/**/*.md", "src/x.md", false},
		{"**/*.{go,md}", "docs/guide.md", true},
		{"**/*.{go,md}", "src/util/strings.txt", false},
		{"./src/?ain.go", "src/main.go", true},
		{"/src/main.go", "src/main.go", true},
		{"[a-c]*.md", "b.md", true},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.pattern)
		if err != nil {
			t.Errorf("compileGlob(%q): %v", tt.pattern, err)
			continue
		}
		if got := g.match(tt.name); got != tt.want {
			t.Errorf("glob %q match %q = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
	if _, err := compileGlob("src/[a-"); err == nil {
		t.Error("malformed pattern compiled")
	}
}

func TestSearchFiles(t *testing.T) {
	env := newEnv(t)
	sampleTree(t, env)
	got := mustCall(t, env, "search_files", map[string]any{"pattern": "**/*.go"})
	if got != "src/main.go\nsrc/util/strings.go" {
		t.Errorf("search **/*.go = %q", got)
	}
	// Pattern relative to path; results relative to the workspace root.
	if got := mustCall(t, env, "search_files", map[string]any{"pattern": "util/*", "path": "src"}); got != "src/util/strings.go\nsrc/util/strings.txt" {
		t.Errorf("search in src = %q", got)
	}
	if got := mustCall(t, env, "search_files", map[string]any{"pattern": "*.rs"}); !strings.HasPrefix(got, "No files match") {
		t.Errorf("no-match search = %q", got)
	}
	if _, err := call(t, env, "search_files", map[string]any{"pattern": "[z-"}); err == nil {
		t.Error("invalid glob accepted")
	}

	files := map[string]string{}
	for i := range 25 {
		files[fmt.Sprintf("many/n%02d.log", i)] = "x"
	}
	writeTree(t, env.FilesDir, files)
	cfg := DefaultConfig()
	cfg.SearchLimit = 5
	got, err := callWith(t, cfg, env, "search_files", map[string]any{"pattern": "*.log"})
	if err != nil {
		t.Fatal(err)
	}
	body, note, _ := strings.Cut(got, "\n\n")
	if len(strings.Split(body, "\n")) != 5 || !strings.Contains(note, "truncated") {
		t.Errorf("capped search = %q", got)
	}
}

func TestSearchContent(t *testing.T) {
	env := newEnv(t)
	sampleTree(t, env)

	got := mustCall(t, env, "search_content", map[string]any{"pattern": `TODO|todo`})
	want := "README.md:2: TODO: write docs\nsrc/util/strings.go:2: // todo: more helpers"
	if got != want {
		t.Errorf("regexp search =\n%s\nwant\n%s", got, want) // .git and the binary png are skipped
	}
	got = mustCall(t, env, "search_content", map[string]any{"pattern": "todo", "case_insensitive": true, "glob": "*.md"})
	if got != "README.md:2: TODO: write docs" {
		t.Errorf("case-insensitive + glob = %q", got)
	}
	got = mustCall(t, env, "search_content", map[string]any{"pattern": `func \w+\(`, "path": "src/main.go"})
	if got != "src/main.go:3: func main() {" {
		t.Errorf("single-file search = %q", got)
	}
	// "foo(" is not a valid regexp: searched literally, and the model is told.
	got = mustCall(t, env, "search_content", map[string]any{"pattern": "foo("})
	if !strings.Contains(got, "literal") || !strings.Contains(got, "docs/guide.md:1: Call foo(bar) to start.") {
		t.Errorf("literal fallback = %q", got)
	}
	if got := mustCall(t, env, "search_content", map[string]any{"pattern": "zebra"}); got != "No matches found." {
		t.Errorf("no match = %q", got)
	}

	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "hit %d\n", i)
	}
	writeTree(t, env.FilesDir, map[string]string{"hits.txt": b.String(), "long.txt": strings.Repeat("y", 5000) + "needle\n"})
	cfg := DefaultConfig()
	cfg.SearchLimit = 7
	got, err := callWith(t, cfg, env, "search_content", map[string]any{"pattern": "^hit"})
	if err != nil {
		t.Fatal(err)
	}
	body, note, _ := strings.Cut(got, "\n\n")
	if len(strings.Split(body, "\n")) != 7 || !strings.Contains(note, "truncated") {
		t.Errorf("capped content search = %q", got)
	}
	got = mustCall(t, env, "search_content", map[string]any{"pattern": "needle"})
	if len(got) > maxLineShown+50 || !strings.HasPrefix(got, "long.txt:1: yyy") {
		t.Errorf("long line not shortened: %d bytes", len(got))
	}
}
