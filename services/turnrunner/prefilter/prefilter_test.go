package prefilter

import (
	"strings"
	"testing"
)

// patterns are rules of the kind the turn runner reads replies with.
var patterns = []Pattern{
	MustCompile(`(?i)\b(?:let'?s go with|we(?:'ll| will) (?:use|go with|do)|decided to|decision:|agreed to)\b`),
	MustCompile(`(?i)\bthe plan is\b`),
	MustCompile(`(?i)\bok(?:ay)?,?\s+(?:option|choice|approach)\s*(?:[a-z]|\d)`),
	MustCompile(`(?i)\b(?:recommended|recommend|suggestion is|best approach|should use|going with)\b`),
	MustCompile(`(?i)\b(every\s+day|daily|weekly|every\s+week|each\s+morning|regularly|recurring|scheduled?|monthly)\b`),
	MustCompile(`https?://[^\s)]+`),
	MustCompile(`^[-*]\s|^\d+\.\s`),
}

// samples match or nearly match those rules, in the casings and foldings
// a case-insensitive match accepts.
var samples = []string{
	"", "hello", "We'll use PostgreSQL.", "WE WILL GO WITH the blue one", "we will do it",
	"Let's go with plan B", "lets go with it", "letsgo with", "The plan is simple", "the planis",
	"OK, option b", "okay choice 2", "ok approach", "oK,   OPTION z", "I'd recommend the second",
	"My suggestion is to wait", "the best approach is", "you should use nats", "decision: ship it",
	"decided to wait", "Back up the disk every  day", "a Weekly report", "SCHEDULED for noon",
	"see HTTP://example.com", "see https://example.com/a", "- item", "12.\tdone", "*bold*",
	// The Kelvin sign and the long s inside a literal (at a word's edge
	// they break \b, an ASCII word boundary, and nothing matches).
	"you should u\u017Fe it", "deci\u017Fion:x", "we'll u\u017Fe it", "o\u212Aay, option b", "the plan i\u017Fx",
	"wee\u212Aly", "re\u017Fumé: we'll use it", "\xff\xfe we'll use", "go\nwith", "the plan\nis",
}

// TestMatchIsTheRegexpsAnswer: skipping the scan never changes an answer.
func TestMatchIsTheRegexpsAnswer(t *testing.T) {
	for _, p := range patterns {
		for _, s := range samples {
			for _, v := range []string{s, strings.ToUpper(s), "x " + s + " y"} {
				if got, want := p.MatchString(v), p.re.MatchString(v); got != want {
					t.Errorf("%s on %q: match %v, regexp %v (needles %q)", p.re, v, got, want, p.needles)
				}
			}
		}
	}
}

func TestRequired(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`(?i)\bthe plan is\b`, []string{"the plan is"}},
		{`(?i)\b(?:conclusion|concluded|summary|in summary)\b`, []string{"conclu", "summary", "in summary"}},
		{`(?i)\bok(?:ay)?,?\s+(?:option|choice|approach)`, []string{"option", "choice", "approach"}},
		{`a*b?`, nil},
		{`x|.`, nil},
		{`(?:ab)+`, []string{"ab"}},
		{`(?:ab){0,2}`, nil},
		{`Résumé`, nil},
		{`HTTP`, []string{"http"}},
	} {
		p := MustCompile(c.expr)
		if strings.Join(p.needles, "|") != strings.Join(c.want, "|") || p.Filters() != (c.want != nil) {
			t.Errorf("%s: needles %q, want %q", c.expr, p.needles, c.want)
		}
	}
}

// FuzzMatch: on any text, every pattern answers as its regexp does.
func FuzzMatch(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pt := Prepare(s)
		for _, p := range patterns {
			if got, want := p.Match(pt), p.re.MatchString(s); got != want {
				t.Fatalf("%s on %q: match %v, regexp %v", p.re, s, got, want)
			}
		}
	})
}
