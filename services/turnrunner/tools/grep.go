package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// maxLineShown caps each matching line in search_content's output; minified
// files would otherwise blow the result up with one hit.
const maxLineShown = 300

type searchContentTool struct{ cfg Config }

func (searchContentTool) Name() string { return "search_content" }

func (t searchContentTool) Description() string {
	return fmt.Sprintf("Search the text of files in the workspace for a regular expression (Go RE2 syntax; a "+
		"pattern that is not a valid expression is searched for as literal text). Optional path limits the "+
		"search to a file or directory, glob filters file names (e.g. \"*.go\", \"src/**/*.ts\"), and "+
		"case_insensitive ignores case. Returns matching lines as \"path:line: text\" with paths relative to "+
		"the workspace root; binary files are skipped. At most %d matches are returned.", t.cfg.SearchLimit)
}

func (searchContentTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"Regular expression (or literal text) to search for"},` +
		`"path":{"type":"string","description":"File or directory to search, relative to the workspace root (default: the root)"},` +
		`"glob":{"type":"string","description":"Only search files whose path matches this glob, e.g. *.md"},` +
		`"case_insensitive":{"type":"boolean","description":"Ignore case (default false)"}` +
		`},"required":["pattern"]}`)
}

// searchContentInput is search_content's arguments.
type searchContentInput struct {
	Pattern         string  `json:"pattern"`
	Path            string  `json:"path,omitempty"`
	Glob            string  `json:"glob,omitempty"`
	CaseInsensitive boolArg `json:"case_insensitive,omitempty"`
}

func (in *searchContentInput) validate() error {
	if in.Pattern == "" {
		return errors.New("pattern is required")
	}
	return nil
}

func (t searchContentTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (t searchContentTool) run(ctx context.Context, env Env, in *searchContentInput) (string, error) {
	re, literal := compileSearch(in.Pattern, bool(in.CaseInsensitive))
	var filter *glob
	if strings.TrimSpace(in.Glob) != "" {
		g, err := compileGlob(in.Glob)
		if err != nil {
			return "", err
		}
		filter = &g
	}
	ws, rel, err := openPath(env, in.Path)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	info, err := ws.root.Stat(rel)
	if err != nil {
		return "", fsError(rel, err)
	}

	s := &searcher{ws: ws, re: re, limit: t.cfg.SearchLimit, maxSize: t.cfg.SearchMaxFileSize}
	if info.IsDir() {
		err = walk(ctx, ws.fsys, rel, func(p string, d fs.DirEntry) error {
			if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			if filter != nil && !filter.match(relativeTo(rel, p)) {
				return nil
			}
			return s.file(p)
		})
	} else {
		err = s.file(rel)
	}
	if errors.Is(err, errStopWalk) {
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fsError(rel, err)
	}

	var out strings.Builder
	if literal {
		out.WriteString("(pattern is not a valid regular expression; searched for it as literal text)\n")
	}
	if len(s.hits) == 0 {
		out.WriteString("No matches found.")
		return out.String(), nil
	}
	out.WriteString(strings.Join(s.hits, "\n"))
	if s.truncated {
		fmt.Fprintf(&out, "\n\n[truncated: showing the first %d matches; narrow the pattern, path or glob to see more]", s.limit)
	}
	return out.String(), nil
}

// compileSearch compiles pattern as a regexp, falling back to a literal
// match when it does not compile (models often pass "foo(" or "a[b").
func compileSearch(pattern string, ci bool) (re *regexp.Regexp, literal bool) {
	prefix := ""
	if ci {
		prefix = "(?i)"
	}
	if re, err := regexp.Compile(prefix + pattern); err == nil {
		return re, false
	}
	return regexp.MustCompile(prefix + regexp.QuoteMeta(pattern)), true
}

type searcher struct {
	ws        *workspace
	re        *regexp.Regexp
	limit     int
	maxSize   int64
	hits      []string
	truncated bool
}

// file appends p's matching lines; it returns errStopWalk at the cap.
// Files that cannot be read are skipped: one unreadable file should not
// spoil a search of the tree.
func (s *searcher) file(p string) error {
	f, err := s.ws.root.Open(p)
	if err != nil {
		return nil // includes a symlink leading outside: simply not searched
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() > s.maxSize {
		return nil
	}
	br := bufio.NewReaderSize(f, sniffLen)
	if head, _ := br.Peek(sniffLen); looksBinary(head) {
		return nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), int(s.maxSize)+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if !s.re.Match(line) {
			continue
		}
		if len(s.hits) == s.limit {
			s.truncated = true
			return errStopWalk
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if len(text) > maxLineShown {
			text = truncateUTF8(text, maxLineShown) + "…"
		}
		s.hits = append(s.hits, fmt.Sprintf("%s:%d: %s", p, n, text))
	}
	return nil
}
