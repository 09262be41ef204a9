package tools

import (
	"fmt"
	"path"
	"strings"
)

// glob is a compiled file pattern: path.Match syntax per segment, "**" for
// any number of segments, and {a,b} alternatives. A pattern without "/"
// matches a base name at any depth (as .gitignore does), so "*.go" finds Go
// files everywhere.
type glob struct {
	alts     [][]string // each alternative split into segments
	baseOnly bool
}

func compileGlob(pattern string) (glob, error) {
	p := strings.TrimSpace(pattern)
	p = strings.TrimPrefix(p, "./")
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return glob{}, fmt.Errorf("pattern is empty")
	}
	g := glob{baseOnly: !strings.Contains(p, "/")}
	for _, alt := range expandBraces(p) {
		segs := strings.Split(alt, "/")
		for _, s := range segs {
			if s == "**" {
				continue
			}
			if _, err := path.Match(s, ""); err != nil {
				return glob{}, fmt.Errorf("invalid pattern %q: %v", pattern, err)
			}
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// match reports whether the slash-separated relative path name matches.
func (g glob) match(name string) bool {
	if g.baseOnly {
		name = path.Base(name)
	}
	segs := strings.Split(name, "/")
	for _, alt := range g.alts {
		if matchSegments(alt, segs) {
			return true
		}
	}
	return false
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := range len(name) + 1 {
				if matchSegments(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// expandBraces turns "a.{go,md}" into ["a.go", "a.md"], innermost-first for
// nested groups. An unbalanced brace is left as a literal.
func expandBraces(p string) []string {
	open := -1
	for i, r := range p {
		switch r {
		case '{':
			open = i
		case '}':
			if open < 0 {
				continue
			}
			var out []string
			for _, alt := range strings.Split(p[open+1:i], ",") {
				out = append(out, expandBraces(p[:open]+alt+p[i+1:])...)
			}
			return out
		}
	}
	return []string{p}
}
