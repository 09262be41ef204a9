package autosave

import (
	"regexp"
	"testing"

	"github.com/waggle-os/core/services/turnrunner/prefilter"
)

// TestRulesOverTheReplyFilter: every rule that reads the whole reply has
// literals to rule a reply out by (else it scans every reply).
func TestRulesOverTheReplyFilter(t *testing.T) {
	for _, p := range append(append([]prefilter.Pattern{}, decisions...), inline...) {
		if !p.Filters() {
			t.Errorf("%s: no literal required of a match", p.Regexp())
		}
	}
}

// FuzzRulesAgree: on any text, the rules answer as their regexps do, and
// the line checks as the regexps they replaced.
func FuzzRulesAgree(f *testing.F) {
	for _, s := range []string{"", "1. one\n2. two\n- three\n* four\n10.\tten", "We'll use it", "-x", "3.", "7.\n8.\n9."} {
		f.Add(s)
	}
	bullet := regexp.MustCompile(`^[-*]\s|^\d+\.\s`)
	numbered := regexp.MustCompile(`(?m)^\d+\.`)
	all := append(append([]prefilter.Pattern{}, decisions...), inline...)
	f.Fuzz(func(t *testing.T, s string) {
		pt := prefilter.Prepare(s)
		for _, p := range all {
			if got, want := p.Match(pt), p.Regexp().MatchString(s); got != want {
				t.Fatalf("%s on %q: match %v, regexp %v", p.Regexp(), s, got, want)
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
