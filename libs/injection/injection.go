// Package injection scores text for prompt-injection attempts: attempts to
// override the assistant's role, to extract its system prompt, or to smuggle
// instructions in through content the model reads (tool output, memories).
//
// The rules are those of the original Waggle scanner, kept bit-for-bit so a
// message blocked there is blocked here and vice versa: three groups of
// case-insensitive patterns, the first hit of a group adds the group's weight
// once, and the sum is capped at 1.0.
package injection

import (
	"regexp"
	"strings"
)

// Source says where the scanned text came from; it changes the weight of
// the instruction_injection group.
type Source int

const (
	// UserInput is a message typed by the user.
	UserInput Source = iota
	// ToolOutput is text the model did not get from the user: tool results
	// and recalled memories. Smuggled instructions weigh more here.
	ToolOutput
)

// Flag names, in the order they appear in Result.Flags.
const (
	FlagRoleOverride         = "role_override"
	FlagPromptExtraction     = "prompt_extraction"
	FlagInstructionInjection = "instruction_injection"
)

// Thresholds, in tenths, so comparisons never depend on float rounding.
const (
	safeBelowTenths = 3 // a score of 0.3 or more is unsafe
	blockAtTenths   = 7 // a score of 0.7 or more blocks a chat message
	capTenths       = 10
)

// Result is the outcome of a scan.
type Result struct {
	// Score is in [0, 1], always a whole number of tenths.
	Score float64
	// Flags names the groups that matched, in group order; nil when none did.
	Flags []string
}

// Safe reports whether the text may pass without warning (score < 0.3).
func (r Result) Safe() bool { return tenths(r.Score) < safeBelowTenths }

// Blocked reports whether a chat message with this result is refused
// (score >= 0.7).
func (r Result) Blocked() bool { return tenths(r.Score) >= blockAtTenths }

// tenths rounds instead of truncating so a Score built by hand (0.1+0.2)
// is judged as the decimal it stands for.
func tenths(score float64) int {
	if score < 0 {
		return 0
	}
	return int(score*10 + 0.5)
}

// A flagged tool result is replaced by this text (flags in between) before
// the model or the client sees it; the flagged content itself never leaves.
const (
	sanitizedPrefix = "[SECURITY] Tool output flagged ("
	sanitizedSuffix = "). Content sanitized."
)

// SanitizeToolOutput scans text as tool output. Safe text comes back
// unchanged with false; flagged text is replaced by
// "[SECURITY] Tool output flagged (<flags>). Content sanitized." and true.
func SanitizeToolOutput(text string) (string, bool) {
	r := Scan(text, ToolOutput)
	if r.Safe() {
		return text, false
	}
	return sanitizedPrefix + strings.Join(r.Flags, ", ") + sanitizedSuffix, true
}

// Scan scores text coming from src.
func Scan(text string, src Source) Result {
	hit := matchGroups(text)
	var score int
	var flags []string
	for i := range groups {
		if hit[i] {
			score += groups[i].weight(src)
			flags = append(flags, groups[i].flag)
		}
	}
	score = min(score, capTenths)
	return Result{Score: float64(score) / 10, Flags: flags}
}

// pattern is one rule. Every rule starts with one of a few literals (its
// leads), so a match can only begin where a lead occurs in the text; the
// regex runs anchored there and nowhere else. A benign message then costs
// one pass over its bytes instead of two dozen case-folding regex scans,
// with the same answer (a test compares every rule with its plain,
// unanchored form).
type pattern struct {
	re *regexp.Regexp
	// leads are the ASCII-lower-case literals a match must begin with, at
	// least two bytes each.
	leads []string
	// wordStart stands for a leading \b, checked by hand because an
	// anchored run on a suffix of the text cannot see the byte before it.
	wordStart bool
	source    string // the rule as written in the original, for tests
}

type group struct {
	flag     string
	user     int // weight in tenths for UserInput
	tool     int // weight in tenths for ToolOutput
	patterns []pattern
}

func (g *group) weight(src Source) int {
	if src == ToolOutput {
		return g.tool
	}
	return g.user
}

// leadRef points from a lead literal back to its rule.
type leadRef struct {
	lead           string
	group, pattern int
}

// leadIndex finds lead literals in one pass: a bitset of the leads' first
// two bytes rejects almost every position, and the few survivors are
// compared with the leads starting with that byte.
type leadIndex struct {
	pairs   [1 << 16 / 64]uint64
	byFirst [256][]leadRef
}

func (x *leadIndex) add(ref leadRef) {
	k := uint16(ref.lead[0])<<8 | uint16(ref.lead[1])
	x.pairs[k/64] |= 1 << (k % 64)
	x.byFirst[ref.lead[0]] = append(x.byFirst[ref.lead[0]], ref)
}

func (x *leadIndex) maybe(a, b byte) bool {
	k := uint16(a)<<8 | uint16(b)
	return x.pairs[k/64]&(1<<(k%64)) != 0
}

var leads = func() *leadIndex {
	x := new(leadIndex)
	for gi := range groups {
		for pi, p := range groups[gi].patterns {
			for _, l := range p.leads {
				x.add(leadRef{lead: l, group: gi, pattern: pi})
			}
		}
	}
	return x
}()

// matchGroups reports, per group, whether any of its rules matches text.
func matchGroups(text string) [len(groups)]bool {
	var hit [len(groups)]bool
	in := regexInput(text)
	lower := asciiLower(in)
	left := len(groups)
	for i := 0; i+1 < len(lower) && left > 0; i++ {
		if !leads.maybe(lower[i], lower[i+1]) {
			continue
		}
		for _, ref := range leads.byFirst[lower[i]] {
			if hit[ref.group] || !strings.HasPrefix(lower[i:], ref.lead) {
				continue
			}
			if groups[ref.group].patterns[ref.pattern].matchAt(lower, in, i) {
				hit[ref.group] = true
				left--
			}
		}
	}
	return hit
}

// matchAt runs the rule anchored at byte offset at, where one of its leads
// starts. lower and in must have the same byte offsets, which asciiLower
// and regexInput both preserve.
func (p *pattern) matchAt(lower, in string, at int) bool {
	if p.wordStart && at > 0 && isWordByte(lower[at-1]) {
		return false
	}
	return p.re.MatchString(in[at:])
}

// isWordByte is \b's notion of a word character in both JavaScript (without
// the u flag) and Go: ASCII only.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// jsSpace is JavaScript's \s: Go's \s lacks \v, the Unicode space
// separators, the line/paragraph separators and the BOM, and a NBSP between
// "ignore" and "previous" must not slip past the scanner.
const jsSpace = `[\t\n\v\f\r\p{Zs}\x{2028}\x{2029}\x{FEFF}]`

// translate turns a rule written with JavaScript's \s into a Go regex with
// the same meaning, case-insensitive.
func translate(src string) string {
	return "(?i)" + strings.ReplaceAll(src, `\s`, jsSpace)
}

// rule compiles one original rule to run anchored at its leads.
func rule(src string, leads ...string) pattern {
	body, wordStart := strings.CutPrefix(src, `\b`)
	return pattern{
		re:        regexp.MustCompile(`\A(?:` + translate(body) + `)`),
		leads:     leads,
		wordStart: wordStart,
		source:    src,
	}
}

// groups are the original scanner's rules, in scoring order.
var groups = [...]group{
	{
		flag: FlagRoleOverride, user: 5, tool: 5,
		patterns: []pattern{
			rule(`ignore\s+(all\s+)?previous\s+(instructions|prompts|rules)`, "ignore"),
			rule(`you\s+are\s+now\s+`, "you"),
			rule(`new\s+instructions?\s*:`, "new"),
			rule(`forget\s+(everything|all|your)\s+(you|instructions|rules)`, "forget"),
			rule(`override\s+(your|the|all)\s+(instructions|rules|prompt)`, "override"),
			rule(`disregard\s+(your|the|all|previous)\s+(instructions|rules|prompt)`, "disregard"),
			rule(`ignoriere\s+alle`, "ignoriere"),
			rule(`ignora\s+todas`, "ignora"),
			rule(`ignorez\s+toutes`, "ignorez"),
			rule(`(?:forget|erase|clear|wipe|reset)\s+(?:everything|conversation|memory|context|history|all)`,
				"forget", "erase", "clear", "wipe", "reset"),
			rule(`(?:from\s+now\s+on\s+you\s+are|act\s+as\s+if\s+you\s+are|pretend\s+you\s+are|your\s+new\s+role\s+is)`,
				"from", "act", "pretend", "your"),
		},
	},
	{
		flag: FlagPromptExtraction, user: 4, tool: 4,
		patterns: []pattern{
			rule(`print\s+(your|the)\s+system\s+prompt`, "print"),
			rule(`show\s+(me\s+)?(your|the)\s+(system\s+)?prompt`, "show"),
			rule(`what\s+(is|are)\s+your\s+(system\s+)?(prompt|instructions|rules)`, "what"),
			rule(`repeat\s+(your|the)\s+(system\s+)?(prompt|instructions)`, "repeat"),
			rule(`output\s+(your|the)\s+(system\s+)?prompt\s+verbatim`, "output"),
			rule(`(?:reveal|disclose|show|display|print|output|dump)\s+(?:your\s+)?(?:instructions|system\s+prompt|rules|guidelines|configuration|training)`,
				"reveal", "disclose", "show", "display", "print", "output", "dump"),
		},
	},
	{
		flag: FlagInstructionInjection, user: 3, tool: 6,
		patterns: []pattern{
			rule(`IMPORTANT\s*:\s*(ignore|disregard|forget|override)`, "important"),
			rule(`SYSTEM\s*:\s*`, "system"),
			rule(`\[INST\]`, "[inst]"),
			rule(`<<SYS>>`, "<<sys>>"),
			rule(`\bASSISTANT\s*:\s*`, "assistant"),
			rule(`BEGIN\s+NEW\s+INSTRUCTIONS`, "begin"),
			rule(`(?:system\s+message|admin\s+message|admin\s+override|elevated\s+privileges|root\s+access|operator\s+mode|maintenance\s+mode|debug\s+mode)`,
				"system", "admin", "elevated", "root", "operator", "maintenance", "debug"),
		},
	},
}

// asciiLower lower-cases ASCII letters only. Every pattern letter is ASCII
// and (see regexInput) only ASCII letters can match one, so a literal a
// pattern needs is always present in this form of the text.
func asciiLower(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for j := i; j < len(b); j++ {
		if c := b[j]; 'A' <= c && c <= 'Z' {
			b[j] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// regexInput hides the two non-ASCII letters that Go's case folding equates
// with ASCII ones (ſ with s, the Kelvin sign with k). JavaScript's
// non-Unicode /i never folds a non-ASCII character to an ASCII one, so in
// the original "ſystem:" is not a hit. Each is replaced by a character of
// the same UTF-8 length (so offsets still line up with asciiLower's output)
// that no rule matches and that is neither a word nor a space character.
func regexInput(s string) string {
	if !strings.Contains(s, "\u017F") && !strings.Contains(s, "\u212A") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\u017F': // 2 bytes, like ¿
			return '\u00BF'
		case '\u212A': // 3 bytes, like U+FFFD
			return '\uFFFD'
		}
		return r
	}, s)
}
