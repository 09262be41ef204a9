// Package autosave picks the facts worth keeping from one exchange (the
// user's message and the agent's reply) by rules on the text, as the
// original's autoSaveFromExchange does: no model call. It runs on the
// turn's goroutine before done, so the rules that read the whole reply
// skip it when it lacks their literals (prefilter), and line checks are
// plain code: under a millisecond for a 5,000-token reply, where the
// regexps alone took 15 (BenchmarkExtractLongReply). Preferences and
// corrections go to the personal mind, decisions, recommendations and
// findings to the workspace's.
package autosave

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/prefilter"
)

// Fact is one frame to save.
type Fact struct {
	Content    string
	Importance string // important, normal or temporary
	// Personal sends the fact to the personal mind.
	Personal bool
}

// most is the original's cap on structured extractions per exchange.
const most = 5

var (
	preferences = compile(
		`\bi (?:prefer|like|want|need|always|never)\b`,
		`\bcall me\b`,
		`\bmy (?:name|style|preference)\b`,
		`\bdon'?t (?:ever|always)\b`,
		`\bi(?:'d| would) rather\b`,
		`\bkeep (?:it|things) (?:short|brief|concise|detailed)\b`,
		`\buse (?:bullet|numbered|markdown|plain)\b`,
		`\bstop (?:doing|saying|adding)\b`,
		`\bfrom now on\b`,
		`\bplease (?:always|never|don'?t)\b`,
	)
	styles = []struct {
		re   *regexp.Regexp
		note string
	}{
		{regexp.MustCompile(`(?i)\b(?:bullet|bullets|bullet.?points?|list form)\b`), "Style note: User prefers bullet-point format"},
		{regexp.MustCompile(`(?i)\b(?:keep it (?:short|brief)|tl;?dr|tldr|short version|in brief)\b`), "Style note: User prefers concise responses"},
		{regexp.MustCompile(`(?i)\b(?:explain|detail|elaborate|go deeper|more detail|thorough)\b`), "Style note: User prefers detailed explanations"},
		{regexp.MustCompile(`(?i)\b(?:table|tabular|spreadsheet|columns)\b`), "Style note: User prefers tabular data presentation"},
		{regexp.MustCompile(`(?i)\b(?:code first|show me the code|just the code)\b`), "Style note: User prefers code examples over prose"},
		{regexp.MustCompile(`(?i)\b(?:plain english|simple terms|eli5|layman|non.?technical)\b`), "Style note: User prefers non-technical language"},
	}
	decisions = patterns(
		`\b(?:let'?s go with|we(?:'ll| will) (?:use|go with|do)|decided to|decision:|agreed to)\b`,
		`\bthe plan is\b`,
		`\bok(?:ay)?,?\s+(?:option|choice|approach)\s*(?:[a-z]|\d)`,
		`\blet'?s (?:proceed|move forward|do that|go ahead)\b`,
		`\bwe(?:'re| are) going (?:with|to)\b`,
		`\bfinal(?:ly|ized)?\s+(?:decision|choice|answer)\b`,
		`\bi(?:'ll| will) go (?:with|ahead)\b`,
	)
	correction = regexp.MustCompile(`(?i)\b(?:no,? (?:actually|that'?s wrong|it'?s)|wrong|incorrect|not (?:right|correct|true)|you'?re mistaken)\b`)
	inline     = patterns(
		`\b(?:recommended|recommend|suggestion is|best approach|should use|going with)\b`,
		`\b(?:conclusion|concluded|summary|in summary)\b`,
	)
	urlRe      = regexp.MustCompile(`https?://[^\s)]+`)
	headingRe  = regexp.MustCompile(`(?m)^##?\s+.+$`)
	hashes     = regexp.MustCompile(`^#+\s+`)
	listMark   = regexp.MustCompile(`^[-*\d.#]+\s*`)
	bulletMark = regexp.MustCompile(`^[-*\d.]+\s+`)
	sentence   = regexp.MustCompile(`[.!?\n]+`)
)

// patterns compiles case-insensitive rules that read the whole reply.
func patterns(exprs ...string) []prefilter.Pattern {
	out := make([]prefilter.Pattern, len(exprs))
	for i, p := range exprs {
		out[i] = prefilter.MustCompile(`(?i)` + p)
	}
	return out
}

func compile(patterns ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(`(?i)` + p)
	}
	return out
}

// cut is JavaScript's s.slice(0, n) for the lengths used here (runes;
// exact for text without astral characters).
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

func sentences(s string) []string { return sentence.Split(s, -1) }

func firstMatching(parts []string, re *regexp.Regexp) (string, bool) {
	for _, p := range parts {
		if re.MatchString(p) {
			return p, true
		}
	}
	return "", false
}

// Extract returns the facts of an exchange, in the original's order:
// a stated preference (or else an implicit style note), a decision, a
// correction, research findings, then what a substantial reply holds (a
// recommendation, the user's question, its key points, or a summary).
//
// A slash command, or a message that is mostly directives (tags, options,
// key=value settings: "reload test #tokens 500 --fast"), says nothing about
// the user worth remembering: nothing is kept from such an exchange.
func Extract(user, assistant string) []Fact {
	x := extraction{user: user, assistant: assistant, ulen: protocol.UTF16Len(user), alen: protocol.UTF16Len(assistant)}
	if x.ulen < 20 && x.alen < 100 || mostlyDirectives(user) {
		return nil
	}
	x.reply = prefilter.Prepare(assistant)
	x.preference()
	x.decision()
	x.correction()
	x.research()
	if x.alen > 200 {
		x.workOutput()
	}
	return x.out
}

// extraction is one Extract: the exchange and the facts found so far, in
// the order the original's rules find them (later rules look at how many
// came before).
type extraction struct {
	user, assistant string
	reply           prefilter.Text // assistant, prepared for the patterns
	ulen, alen      int
	out             []Fact
}

func (x *extraction) save(content, importance string, personal bool) {
	x.out = append(x.out, Fact{Content: content, Importance: importance, Personal: personal})
}

// preference keeps a stated preference, or else a style the user asked for.
func (x *extraction) preference() {
	for _, re := range preferences {
		if re.MatchString(x.user) {
			if s, ok := firstMatching(sentences(x.user), re); ok {
				x.save("User preference: "+strings.TrimSpace(s), "normal", true)
			}
			break
		}
	}
	if len(x.out) == 0 && x.ulen > 30 {
		for _, st := range styles {
			if st.re.MatchString(x.user) {
				x.save(st.note, "normal", true)
				break
			}
		}
	}
}

// decision keeps the first decision sentence, the assistant's first.
func (x *extraction) decision() {
	combined := prefilter.Prepare(x.user + "\n" + x.assistant)
	for _, p := range decisions {
		if !p.Match(combined) {
			continue
		}
		if s, ok := firstMatching(sentences(x.assistant), p.Regexp()); ok {
			x.save("Decision: "+cut(strings.TrimSpace(s), 300), "important", false)
		} else if s, ok := firstMatching(sentences(x.user), p.Regexp()); ok {
			x.save("Decision: "+cut(strings.TrimSpace(s), 300), "important", false)
		}
		break
	}
}

func (x *extraction) correction() {
	if correction.MatchString(x.user) {
		x.save("Correction from user: "+cut(x.user, 200), "important", true)
	}
}

// research keeps the headings and sources of a long, researched reply.
func (x *extraction) research() {
	hasURLs := urlRe.MatchString(x.assistant)
	if x.alen <= 600 || !(strings.Contains(x.assistant, "\n## ") && hasURLs || numberedLines(x.assistant, 3)) {
		return
	}
	var parts []string
	for _, h := range first(headingRe.FindAllString(x.assistant, -1), 3) {
		parts = append(parts, hashes.ReplaceAllString(h, ""))
	}
	if urls := first(urlRe.FindAllString(x.assistant, -1), 3); len(urls) > 0 {
		parts = append(parts, "Sources: "+strings.Join(urls, ", "))
	}
	if summary := strings.Join(parts, ". "); protocol.UTF16Len(summary) > 20 {
		x.save("Research findings: "+cut(summary, 400), "important", false)
	}
}

// workOutput keeps what a substantial reply produced: a recommendation,
// the question it answered, its key points, or else what it did.
func (x *extraction) workOutput() {
	var lines []string
	for l := range strings.SplitSeq(x.assistant, "\n") {
		if protocol.UTF16Len(strings.TrimSpace(l)) > 5 {
			lines = append(lines, l)
		}
	}
	structured := x.recommendation(lines)
	structured = x.question() || structured
	heading := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "#") {
			heading = hashes.ReplaceAllString(l, "")
			break
		}
	}
	if x.alen > 500 {
		structured = x.keyPoints(lines, heading) || structured
	}
	if !structured && x.alen > 500 && len(x.out) == 0 {
		x.workCompleted(lines, heading)
	}
}

func (x *extraction) recommendation(lines []string) bool {
	for _, p := range inline {
		if !p.MayMatch(x.reply) {
			continue // no line can match
		}
		var hit string
		for _, l := range lines {
			if p.Regexp().MatchString(l) {
				hit = l
				break
			}
		}
		if hit != "" && len(x.out) < most {
			if text := strings.TrimSpace(listMark.ReplaceAllString(hit, "")); protocol.UTF16Len(text) > 20 {
				x.save("Recommendation: "+cut(text, 300), "important", false)
				return true
			}
		}
	}
	return false
}

// question keeps what the user asked, unless a rule above kept something
// the user said already.
func (x *extraction) question() bool {
	if x.ulen < 30 || x.ulen > 500 || len(x.out) >= most {
		return false
	}
	for _, f := range x.out {
		for _, p := range []string{"User preference:", "Correction from user:", "Decision:"} {
			if strings.HasPrefix(f.Content, p) {
				return false
			}
		}
	}
	x.save("User asked: "+cut(x.user, 300), "temporary", false)
	return true
}

func (x *extraction) keyPoints(lines []string, heading string) bool {
	var bullets []string
	for _, l := range lines {
		if !isBullet(l) {
			continue
		}
		b := strings.TrimSpace(bulletMark.ReplaceAllString(l, ""))
		if n := protocol.UTF16Len(b); n > 15 && n < 300 {
			bullets = append(bullets, b)
		}
	}
	if len(bullets) < 2 || len(x.out) >= most {
		return false
	}
	prefix := "Key points: "
	if heading != "" {
		prefix = heading + ": "
	}
	x.save(prefix+cut(strings.Join(first(bullets, 3), "; "), 400), "normal", false)
	return true
}

func (x *extraction) workCompleted(lines []string, heading string) {
	meaningful := ""
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") && protocol.UTF16Len(l) > 20 {
			meaningful = strings.TrimSpace(l)
			break
		}
	}
	summary := meaningful
	switch {
	case heading != "" && meaningful != "":
		summary = heading + ": " + meaningful
	case heading != "":
		summary = heading
	case summary == "":
		summary = "Work output produced"
	}
	x.save("Work completed: "+cut(summary, 300), "normal", false)
}

// isBullet reports whether line is a list item: "- ", "* " or "12. "
// (the space any of \t \n \f \r and space). A regexp per line cost a
// long reply milliseconds.
func isBullet(line string) bool {
	if line == "" {
		return false
	}
	rest, ok := line[1:], line[0] == '-' || line[0] == '*'
	if !ok {
		rest, ok = afterNumber(line)
	}
	return ok && rest != "" && isSpace(rest[0])
}

// afterNumber is what follows line's leading "digits." when it has them.
func afterNumber(line string) (string, bool) {
	i := 0
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	if i == 0 || i == len(line) || line[i] != '.' {
		return "", false
	}
	return line[i+1:], true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// numberedLines reports whether at least n lines of s start with
// "digits.".
func numberedLines(s string, n int) bool {
	for line := range strings.SplitSeq(s, "\n") {
		if _, ok := afterNumber(line); ok {
			if n--; n == 0 {
				return true
			}
		}
	}
	return false
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// Step is the step text reporting n saved memories.
func Step(n int) string {
	if n == 1 {
		return "Auto-saved 1 memory from this exchange."
	}
	return "Auto-saved " + strconv.Itoa(n) + " memories from this exchange."
}

// mostlyDirectives reports whether a message is a command rather than
// something said: it starts with a slash, or directive words (#tag,
// @mention, --option, key=value, /path-like commands) are at least half of
// its words.
func mostlyDirectives(message string) bool {
	words := strings.Fields(message)
	if len(words) == 0 {
		return false
	}
	if strings.HasPrefix(words[0], "/") {
		return true
	}
	directives := 0
	for _, w := range words {
		if isDirective(w) {
			directives++
		}
	}
	return 2*directives >= len(words)
}

func isDirective(word string) bool {
	switch {
	case len(word) > 1 && (word[0] == '#' || word[0] == '@' || word[0] == '/'):
		return true
	case strings.HasPrefix(word, "--") && len(word) > 2:
		return true
	case strings.Contains(word, "=") && !strings.HasPrefix(word, "=") && !strings.HasSuffix(word, "="):
		return true
	}
	_, err := strconv.ParseFloat(strings.TrimSuffix(word, "%"), 64)
	return err == nil // bare numbers go with the directive they set
}
