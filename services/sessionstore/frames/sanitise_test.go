package frames

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// regexpSanitise is the regular-expression Sanitise this package had
// before the scanners (quadratic on many script elements, and slow on any
// long input): the oracle the scanners must agree with byte for byte.
func regexpSanitise(s string) string {
	s = regexpStripScripts(s)
	s = oldEventAttr.ReplaceAllString(s, "")
	s = oldBadURL.ReplaceAllString(s, `${1}="`)
	return oldBadTag.ReplaceAllString(s, "")
}

var (
	oldEventAttr = regexp.MustCompile(`(?i)\s+on\w+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)`)
	oldBadURL    = regexp.MustCompile(`(?i)(href|src)\s*=\s*["']?\s*(?:javascript|data|vbscript)\s*:`)
	oldBadTag    = regexp.MustCompile(`(?i)<\s*/?\s*(?:iframe|object|embed|form|input|textarea|button)\b[^>]*>`)
	oldScriptTag = regexp.MustCompile(`(?i)<script\b`)
)

func regexpStripScripts(s string) string {
	for {
		loc := oldScriptTag.FindStringIndex(s)
		if loc == nil {
			return s
		}
		end := strings.Index(strings.ToLower(s[loc[1]:]), "</script>")
		if end < 0 {
			return s
		}
		s = s[:loc[0]] + s[loc[1]+end+len("</script>"):]
	}
}

// sanitiseCases are inputs whose output the two versions must agree on:
// ordinary text, each rule's matches and near misses, and joins.
var sanitiseCases = []string{
	"", "plain **markdown** text", "a<script>alert(1)</script>b",
	"a<SCRIPT src=x>x</ScRiPt>b<script>y</script>c", "unclosed <script>x", "<script",
	"<scriptx>no</script>", "<script>", "</script>", "<script></script>", "<script\n>a</script >b</script>",
	"<scr<script>x</script>ipt>y</script>z", "<<script>a</script>script>b</script>c",
	"<script>a</script><script>b", "x<script/>y</SCRIPT>z",
	`<img src=x onerror="alert(1)">`, `<img src=x onerror = 'alert(1)' >`, `<img onload=alert(1)>`,
	`<p on="x">`, `<p onx=>`, `<p onx= >`, `<p onx="unclosed>`, `<p onx='unclosed >`, "<p\tONCLICK\n=\nfoo bar>",
	` onx="a" ony="b"`, `  onx=1  ony=2`, `a onx="b onx="c`, `onx=1`, ` on_=1`, ` on1=2`,
	`<a href='javascript:alert(1)'>x</a>`, `<a href="https://ok.example">ok</a>`,
	`<a HREF = " JavaScript :x">`, `<a href=vbscript:x>`, `<img SRC="data:image/png;base64,xx">`,
	`<a href="java script:x">`, `<a hrefhref=javascript:x>`, `xsrc=data:`, `src=''data:`, `src= "  data  :`,
	`<iframe src="https://x"></iframe>text<button>`, `< / IFRAME >`, `<iframex>`, `<form-x>`, `<input`,
	`<textarea>t</textarea>`, `<object data="x">`, `<embed>`, `<buttons>`, `<button`, "<\nform\n>",
	"日本語 <script>é</script> ü", "café onmouseover=ü>", "on\x00=1",
}

// The regular-expression version found "</script>" in a lower-cased copy
// and cut the original at that index: wrong, or a panic, wherever
// lower-casing changes the length (invalid UTF-8, "İ"). The scanners work
// on the bytes as they are.
func TestSanitiseKeepsBytesThatLowerCasingWouldResize(t *testing.T) {
	for in, want := range map[string]string{
		"\xff<script>\xfe</script>\xfd": "\xff\xfd",
		"<script>İİ</script>ok":         "ok",
		"İ<script>x</SCRİPT>y":          "İ<script>x</SCRİPT>y",
	} {
		if got := Sanitise(in); got != want {
			t.Errorf("Sanitise(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSanitiseMatchesTheRegularExpressions(t *testing.T) {
	for _, in := range sanitiseCases {
		if got, want := Sanitise(in), regexpSanitise(in); got != want {
			t.Errorf("Sanitise(%q) = %q, the regular expressions give %q", in, got, want)
		}
	}
}

// Random texts built from the rules' pieces (and their near misses)
// exercise the joins and overlaps a table misses.
func TestSanitiseMatchesTheRegularExpressionsOnRandomTexts(t *testing.T) {
	pieces := []string{
		"<script", "<SCRIPT", "<scr", "ipt", ">", "</script>", "</SCRIPT>", "</scr", "<", "/", " ", "\t", "\n",
		"on", "ON", "click", "=", `"`, "'", "x", "1", "_", "href", "HREF", "src", "javascript", "data", "vbscript",
		":", "iframe", "form", "input", "button", "textarea", "object", "embed", "é", "日", "-", "a",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := b.String()
		if got, want := Sanitise(in), regexpSanitise(in); got != want {
			t.Fatalf("Sanitise(%q) = %q, the regular expressions give %q", in, got, want)
		}
	}
}

// hostileInputs are 1 MiB texts shaped to make a sanitiser rescan: many
// script elements, unclosed quotes and tags, long runs of spaces.
func hostileInputs(n int) map[string]string {
	fill := func(unit string) string { return strings.Repeat(unit, n/len(unit)) }
	return map[string]string{
		"plain":          fill("hello world "),
		"scripts":        fill("<script>x</script>"),
		"nested scripts": strings.Repeat("<scr", n/16) + strings.Repeat("<script></script>ipt>", n/40),
		"unclosed tags":  fill("<iframe "),
		"unclosed quote": fill(` onx="a`),
		"event attrs":    fill(` onclick=x`),
		"spaces":         fill(" "),
		"urls":           fill(`href= src = "`),
		"opens":          fill("<script "),
	}
}

// A 1 MiB body of any shape is sanitised, with the rules applied (the
// regular-expression version took tens of seconds on some of these; the
// benchmark below measures the time).
func TestSanitiseOneMebibyte(t *testing.T) {
	for name, in := range hostileInputs(1 << 20) {
		got := Sanitise(in)
		switch name {
		case "scripts":
			if got != "" {
				t.Errorf("%s: %d bytes left, want none", name, len(got))
			}
		case "event attrs":
			if strings.Contains(got, "onclick") {
				t.Errorf("%s: an event attribute is left", name)
			}
		case "plain", "spaces", "unclosed tags", "opens":
			if got != in {
				t.Errorf("%s: changed", name)
			}
		}
	}
}

func BenchmarkSanitise(b *testing.B) {
	for name, in := range hostileInputs(1 << 20) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				Sanitise(in)
			}
		})
	}
}
