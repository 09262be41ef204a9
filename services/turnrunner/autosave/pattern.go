package autosave

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pattern is a rule's regular expression with the literals one of which
// every match contains, read from its syntax tree. Go's regexp scans a
// text without a literal prefix rune by rune (about 2 MB/s for these
// case-insensitive, word-bounded alternations: 15 ms for a 5,000-token
// reply, on the turn's goroutine before done); a reply holding none of
// the literals cannot match, which strings.Contains tells at memory speed.
type pattern struct {
	re *regexp.Regexp
	// needles are lowercase ASCII; nil when no literal is required (the
	// pattern always runs).
	needles []string
}

// mustPattern compiles expr as regexp.MustCompile does.
func mustPattern(expr string) pattern {
	re := regexp.MustCompile(expr)
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		panic(err) // MustCompile accepted it
	}
	return pattern{re: re, needles: required(tree.Simplify())}
}

// required is a set of lowercase strings one of which every match of re
// contains, or nil when none is known.
func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return nil // lowercasing and Unicode folding may disagree
			}
		}
		return []string{strings.ToLower(s)}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		// Every part is in every match: the part whose shortest literal is
		// longest filters best.
		var best []string
		for _, sub := range re.Sub {
			if r := required(sub); r != nil && (best == nil || shortest(r) > shortest(best)) {
				best = r
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			r := required(sub)
			if r == nil {
				return nil
			}
			all = append(all, r...)
		}
		return all
	}
	return nil
}

func shortest(ss []string) int {
	n := len(ss[0])
	for _, s := range ss[1:] {
		n = min(n, len(s))
	}
	return n
}

// text is a text prepared for patterns.
type text struct {
	s     string
	lower string
	// folds is set when s holds a non-ASCII rune that a case-insensitive
	// match takes for an ASCII letter (the Kelvin sign for k, the long s
	// for s): the needles cannot judge it.
	folds bool
}

// prepare lowercases s once for every pattern that reads it.
func prepare(s string) text {
	return text{s: s, lower: strings.ToLower(s), folds: strings.ContainsFunc(s, foldsToASCII)}
}

// asciiFolds are the non-ASCII runes in the case-folding orbit of an
// ASCII letter.
var asciiFolds = func() map[rune]bool {
	m := map[rune]bool{}
	for c := 'a'; c <= 'z'; c++ {
		for r := unicode.SimpleFold(c); r != c; r = unicode.SimpleFold(r) {
			if r >= utf8.RuneSelf {
				m[r] = true
			}
		}
	}
	return m
}()

func foldsToASCII(r rune) bool { return r >= utf8.RuneSelf && asciiFolds[r] }

// mayMatch reports whether t can hold a match: false only when it holds
// none of the needles.
func (p pattern) mayMatch(t text) bool {
	if p.needles == nil || t.folds {
		return true
	}
	for _, n := range p.needles {
		if strings.Contains(t.lower, n) {
			return true
		}
	}
	return false
}

// match is p.re.MatchString(t.s), skipping the scan when t cannot match.
func (p pattern) match(t text) bool { return p.mayMatch(t) && p.re.MatchString(t.s) }
