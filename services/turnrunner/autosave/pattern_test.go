package autosave

import (
	"regexp"
	"strings"
	"testing"
)

// samples match or nearly match the rules that read the whole reply, in
// the casings and foldings a case-insensitive match accepts.
var samples = []string{
	"", "hello", "We'll use PostgreSQL.", "WE WILL GO WITH the blue one", "we will do it",
	"Let's go with plan B", "lets go with it", "letsgo with", "The plan is simple", "the planis",
	"OK, option b", "okay choice 2", "ok approach", "oK,   OPTION z", "Let's proceed.", "lets move forward",
	"We're going with Go", "we are going to ship", "Finally decision made", "finalized   choice", "final answer",
	"I'll go ahead", "i will go with that", "I'd recommend the second", "My suggestion is to wait",
	"the best approach is", "you should use nats", "In summary, it works", "we concluded that",
	"decision: ship it", "agreed to the terms", "decided to wait",
	// The Kelvin sign and the long s inside a needle (at a word's edge
	// they break \b, an ASCII word boundary, and nothing matches).
	"you should u\u017Fe it", "deci\u017Fion:x", "we'll u\u017Fe it", "o\u212Aay, option b", "the plan i\u017Fx",
	"résumé: we'll use it", "\xff\xfe we'll use", "go\nwith", "the plan\nis",
}

// TestPatternsAgreeWithTheirRegexps: skipping the scan never changes an
// answer: match is the regexp's own answer on every sample, and the rules
// that read the whole reply all have needles (else nothing is skipped).
func TestPatternsAgreeWithTheirRegexps(t *testing.T) {
	all := append(append([]pattern{}, decisions...), inline...)
	for _, p := range all {
		if p.needles == nil {
			t.Errorf("%s: no needles found", p.re)
		}
		for _, s := range samples {
			for _, v := range []string{s, strings.ToUpper(s), "x " + s + " y"} {
				if got, want := p.match(prepare(v)), p.re.MatchString(v); got != want {
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
		p := mustPattern(c.expr)
		if strings.Join(p.needles, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: needles %q, want %q", c.expr, p.needles, c.want)
		}
	}
}

// FuzzPatternsAgree: on any text, every whole-reply rule answers as its
// regexp does; the line checks answer as the regexps they replaced.
func FuzzPatternsAgree(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Add("1. one\n2. two\n- three\n* four\n10.\tten")
	bullet := regexp.MustCompile(`^[-*]\s|^\d+\.\s`)
	numbered := regexp.MustCompile(`(?m)^\d+\.`)
	all := append(append([]pattern{}, decisions...), inline...)
	f.Fuzz(func(t *testing.T, s string) {
		pt := prepare(s)
		for _, p := range all {
			if got, want := p.match(pt), p.re.MatchString(s); got != want {
				t.Fatalf("%s on %q: match %v, regexp %v", p.re, s, got, want)
			}
		}
		if got, want := isBullet(s), bullet.MatchString(s); got != want {
			t.Fatalf("isBullet(%q) = %v, regexp %v", s, got, want)
		}
		if got, want := numberedLines(s, 3), len(numbered.FindAllString(s, -1)) >= 3; got != want {
			t.Fatalf("numberedLines(%q) = %v, regexp %v", s, got, want)
		}
	})
}
