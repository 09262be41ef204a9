// Package docpaths keeps the documentation honest about files and tests:
// every repository path that README.md or docs/*.md names (in backticks,
// in a code block or as a link) must exist in the repository, and every
// test, benchmark or fuzz function they cite must be one. The design brief
// and the HTTP contract live outside the checkout (../shared/…); the docs
// say so in words and do not link to them as if they were repo files.
package docpaths

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoPrefixes are the top-level directories whose paths the check knows
// to be repo-relative wherever they appear.
var repoPrefixes = []string{"services/", "libs/", "docs/", "scripts/", "deploy/", ".ci/"}

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// pathToken is a run of characters a path is written with.
	pathToken = regexp.MustCompile(`[A-Za-z0-9_./*<>{}…,:-]+`)
)

// repoRoot is the directory holding go.work, above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test directory")
		}
		dir = parent
	}
}

// docFiles are README.md and docs/*.md, relative to root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		out = append(out, filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator))))
	}
	return out
}

// repoPath turns a token that names a repo path into the part of it that
// must exist: "./" and a ":line" suffix dropped, cut before the first
// pattern component (services/*/…, ./libs/..., <name>, {a,b}). ok is false
// for tokens that are not repo paths.
func repoPath(tok string) (string, bool) {
	tok = strings.TrimPrefix(tok, "./")
	tok = strings.TrimRight(tok, ".,:;")
	known := false
	for _, p := range repoPrefixes {
		if strings.HasPrefix(tok, p) {
			known = true
		}
	}
	if !known {
		return "", false
	}
	var keep []string
	for _, c := range strings.Split(tok, "/") {
		if c == "" || c == "..." || strings.ContainsAny(c, "*<>{}…,") {
			break
		}
		if i := strings.IndexByte(c, ':'); i >= 0 { // file.go:123
			keep = append(keep, c[:i])
			break
		}
		if pkg, ident, ok := strings.Cut(c, "."); ok && ident != "" && ident[0] >= 'A' && ident[0] <= 'Z' {
			keep = append(keep, pkg) // a Go identifier: libs/pgtest.URL
			break
		}
		keep = append(keep, c)
	}
	return strings.Join(keep, "/"), len(keep) > 0
}

// markdownPath reports a path to a Markdown file outside the known
// top-level folders (reference/original-behaviour.md, contract/…): one
// the repository must hold, unless it is the design brief beside the
// checkout (../shared/…, see TestDocsSayTheBriefIsOutside).
func markdownPath(tok string) (string, bool) {
	tok = strings.TrimRight(tok, ".,:;")
	if !strings.HasSuffix(tok, ".md") || !strings.Contains(tok, "/") || strings.HasPrefix(tok, "../") ||
		strings.ContainsAny(tok, "*<>{}…,:") || strings.HasPrefix(tok, "//") {
		return "", false
	}
	return strings.TrimPrefix(tok, "./"), true
}

// goFileSuffix reports a Go file named by its last folders
// (ownership/state.go, teamauth/rules.go): some file of the repository
// must end with it.
func goFileSuffix(tok string) (string, bool) {
	tok = strings.TrimRight(tok, ".,:;")
	if i := strings.LastIndex(tok, ".go:"); i >= 0 { // state.go:42
		tok = tok[:i+3]
	}
	if !strings.HasSuffix(tok, ".go") || !strings.Contains(tok, "/") || strings.HasPrefix(tok, "../") ||
		strings.ContainsAny(tok, "*<>{}…,:") {
		return "", false
	}
	return strings.TrimPrefix(tok, "./"), true
}

// repoFiles lists every file of the checkout, slash-separated and
// relative to root (.git and other hidden folders but .ci skipped).
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// reference is one path a doc names.
type reference struct {
	doc  string
	line int
	path string // as written
	file string // repo-relative path that must exist
	// suffix: file is the end of a repo file's path, not the whole of it.
	suffix bool
}

func (r reference) String() string { return fmt.Sprintf("%s:%d: %q", r.doc, r.line, r.path) }

// references lists the paths doc names: repo paths in inline code and code
// blocks, and every relative link target (resolved from the doc's folder).
func references(t *testing.T, root, doc string) []reference {
	t.Helper()
	f, err := os.Open(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var refs []reference
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				file := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), target)))
				refs = append(refs, reference{doc: doc, line: n, path: m[1], file: file})
			}
		}
		// A repo path names a file in prose, inline code and code blocks
		// alike.
		for _, tok := range pathToken.FindAllString(line, -1) {
			if file, ok := repoPath(tok); ok {
				refs = append(refs, reference{doc: doc, line: n, path: tok, file: file})
			} else if file, ok := markdownPath(tok); ok {
				refs = append(refs, reference{doc: doc, line: n, path: tok, file: file})
			} else if file, ok := goFileSuffix(tok); ok {
				refs = append(refs, reference{doc: doc, line: n, path: tok, file: file, suffix: true})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return refs
}

// sharedMentions are the lines of doc that name a file of the design brief
// (../shared/…) in a paragraph that does not say the file is outside the
// repository, and how many mentions there are.
func sharedMentions(t *testing.T, root, doc string) (missing []reference, n int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		for _, tok := range pathToken.FindAllString(line, -1) {
			if !strings.Contains(tok, "shared/") || strings.Contains(line, "://") {
				continue
			}
			n++
			from, to := i, i+1 // the paragraph: up to the blank lines around it
			for from > 0 && strings.TrimSpace(lines[from-1]) != "" {
				from--
			}
			for to < len(lines) && strings.TrimSpace(lines[to]) != "" {
				to++
			}
			around := strings.Join(lines[from:to], " ")
			if !strings.Contains(around, "outside") {
				missing = append(missing, reference{doc: doc, line: i + 1, path: tok})
			}
		}
	}
	return missing, n
}

// TestDocsSayTheBriefIsOutside: the design brief, its HTTP contract and
// the reference (../shared/… beside the checkout) are named as what they
// are — not files of this repository.
func TestDocsSayTheBriefIsOutside(t *testing.T) {
	root := repoRoot(t)
	total := 0
	for _, doc := range docFiles(t, root) {
		missing, n := sharedMentions(t, root, doc)
		total += n
		for _, r := range missing {
			t.Errorf("%s names a design-brief file without saying it is outside the repository", r)
		}
	}
	if total == 0 {
		t.Fatal("no doc names the design brief: README.md should say where it is")
	}
}

// TestDocsNameFilesThatExist: a path the docs name is one a reader finds
// in the checkout.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := repoRoot(t)
	files := repoFiles(t, root)
	checked := 0
	for _, doc := range docFiles(t, root) {
		for _, r := range references(t, root, doc) {
			checked++
			if strings.HasPrefix(r.file, "../") {
				t.Errorf("%s links outside the repository (name the design brief in words: `../shared/…` beside the checkout)", r)
				continue
			}
			if r.suffix {
				if !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, "/"+r.file) }) {
					t.Errorf("%s: no file of the repository ends with %s", r, r.file)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.file))); err != nil {
				t.Errorf("%s: %s is not in the repository", r, r.file)
			}
		}
	}
	t.Logf("%d paths named in the docs checked", checked)
	if checked < 50 {
		t.Fatalf("only %d paths found in the docs: the scanner is broken", checked)
	}
}

func TestRepoPath(t *testing.T) {
	tests := []struct {
		tok, want string
		ok        bool
	}{
		{"services/gateway/webchat", "services/gateway/webchat", true},
		{"./services/waggle/...", "services/waggle", true},
		{"services/*/store.go", "services", true},
		{"libs/bus/bus.go:42", "libs/bus/bus.go", true},
		{"docs/api.md.", "docs/api.md", true},
		{"libs/pgtest.URL", "libs/pgtest", true},
		{"../shared/DESIGN.md", "", false},
		{"app/src-tauri/src/service.rs", "", false},
	}
	for _, tok := range []string{"reference/original-behaviour.md", "contract/03a-chat-agent-session-api.md."} {
		if _, ok := markdownPath(tok); !ok {
			t.Errorf("markdownPath(%q) is not checked", tok)
		}
	}
	if got, ok := goFileSuffix("ownership/state.go:42"); !ok || got != "ownership/state.go" {
		t.Errorf("goFileSuffix: %q %v", got, ok)
	}
	if _, ok := markdownPath("../shared/reference/original-behaviour.md"); ok {
		t.Error("the design brief beside the checkout is checked as a repo file")
	}
	for _, tt := range tests {
		if got, ok := repoPath(tt.tok); got != tt.want || ok != tt.ok {
			t.Errorf("repoPath(%q) = %q %v, want %q %v", tt.tok, got, ok, tt.want, tt.ok)
		}
	}
}

var (
	// testFunc is a test, benchmark or fuzz function's declaration.
	testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)
	// testName is such a name in prose, with an optional brace list of
	// alternatives and its rest (`TestEdge{A,B}Refused`) or a trailing *
	// for every test it begins (`TestBurstIntoOneSession*`).
	testName = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)(?:\{([A-Za-z0-9_,]+)\}([A-Za-z0-9_]*))?(\*)?`)
)

// TestDocsNameTestsThatExist: a test the docs cite as evidence is one a
// reader can run.
func TestDocsNameTestsThatExist(t *testing.T) {
	root := repoRoot(t)
	funcs := map[string]bool{}
	for _, f := range repoFiles(t, root) {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllSubmatch(data, -1) {
			funcs[string(m[1])] = true
		}
	}
	exists := func(name string, prefix bool) bool {
		if !prefix {
			return funcs[name]
		}
		for f := range funcs {
			if strings.HasPrefix(f, name) {
				return true
			}
		}
		return false
	}
	checked := 0
	for _, doc := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range testName.FindAllStringSubmatch(line, -1) {
				names := []string{m[1]}
				if m[2] != "" {
					names = names[:0]
					for alt := range strings.SplitSeq(m[2], ",") {
						names = append(names, m[1]+alt+m[3])
					}
				}
				for _, n := range names {
					checked++
					if !exists(n, m[4] == "*") {
						t.Errorf("%s:%d: %s is not a test, benchmark or fuzz function of the repository", doc, i+1, n)
					}
				}
			}
		}
	}
	t.Logf("%d test names in the docs checked", checked)
	if checked < 50 {
		t.Fatalf("only %d test names found in the docs: the scanner is broken", checked)
	}
}
