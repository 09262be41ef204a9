// Package autosave picks the facts worth keeping from one exchange (the
// user's message and the agent's reply) by rules on the text, as the
// original's autoSaveFromExchange does: no model call, so it costs the
// turn nothing measurable. Preferences and corrections go to the personal
// mind, decisions, recommendations and findings to the workspace's.
package autosave

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
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
	decisions = compile(
		`\b(?:let'?s go with|we(?:'ll| will) (?:use|go with|do)|decided to|decision:|agreed to)\b`,
		`\bthe plan is\b`,
		`\bok(?:ay)?,?\s+(?:option|choice|approach)\s*(?:[a-z]|\d)`,
		`\blet'?s (?:proceed|move forward|do that|go ahead)\b`,
		`\bwe(?:'re| are) going (?:with|to)\b`,
		`\bfinal(?:ly|ized)?\s+(?:decision|choice|answer)\b`,
		`\bi(?:'ll| will) go (?:with|ahead)\b`,
	)
	correction = regexp.MustCompile(`(?i)\b(?:no,? (?:actually|that'?s wrong|it'?s)|wrong|incorrect|not (?:right|correct|true)|you'?re mistaken)\b`)
	inline     = compile(
		`\b(?:recommended|recommend|suggestion is|best approach|should use|going with)\b`,
		`\b(?:conclusion|concluded|summary|in summary)\b`,
	)
	urlRe      = regexp.MustCompile(`https?://[^\s)]+`)
	numbered   = regexp.MustCompile(`(?m)^\d+\.`)
	headingRe  = regexp.MustCompile(`(?m)^##?\s+.+$`)
	hashes     = regexp.MustCompile(`^#+\s+`)
	listMark   = regexp.MustCompile(`^[-*\d.#]+\s*`)
	bulletLine = regexp.MustCompile(`^[-*]\s|^\d+\.\s`)
	bulletMark = regexp.MustCompile(`^[-*\d.]+\s+`)
	sentence   = regexp.MustCompile(`[.!?\n]+`)
)

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
func Extract(user, assistant string) []Fact {
	var out []Fact
	save := func(content, importance string, personal bool) {
		out = append(out, Fact{Content: content, Importance: importance, Personal: personal})
	}
	ulen, alen := protocol.UTF16Len(user), protocol.UTF16Len(assistant)
	if ulen < 20 && alen < 100 {
		return nil
	}

	for _, re := range preferences {
		if re.MatchString(user) {
			if s, ok := firstMatching(sentences(user), re); ok {
				save("User preference: "+strings.TrimSpace(s), "normal", true)
			}
			break
		}
	}
	if len(out) == 0 && ulen > 30 {
		for _, st := range styles {
			if st.re.MatchString(user) {
				save(st.note, "normal", true)
				break
			}
		}
	}

	combined := user + "\n" + assistant
	for _, re := range decisions {
		if !re.MatchString(combined) {
			continue
		}
		if s, ok := firstMatching(sentences(assistant), re); ok {
			save("Decision: "+cut(strings.TrimSpace(s), 300), "important", false)
		} else if s, ok := firstMatching(sentences(user), re); ok {
			save("Decision: "+cut(strings.TrimSpace(s), 300), "important", false)
		}
		break
	}

	if correction.MatchString(user) {
		save("Correction from user: "+cut(user, 200), "important", true)
	}

	hasURLs := urlRe.MatchString(assistant)
	if alen > 600 && (strings.Contains(assistant, "\n## ") && hasURLs || len(numbered.FindAllString(assistant, -1)) >= 3) {
		var parts []string
		for _, h := range first(headingRe.FindAllString(assistant, -1), 3) {
			parts = append(parts, hashes.ReplaceAllString(h, ""))
		}
		if urls := first(urlRe.FindAllString(assistant, -1), 3); len(urls) > 0 {
			parts = append(parts, "Sources: "+strings.Join(urls, ", "))
		}
		if summary := strings.Join(parts, ". "); protocol.UTF16Len(summary) > 20 {
			save("Research findings: "+cut(summary, 400), "important", false)
		}
	}

	if alen > 200 {
		var lines []string
		for l := range strings.SplitSeq(assistant, "\n") {
			if protocol.UTF16Len(strings.TrimSpace(l)) > 5 {
				lines = append(lines, l)
			}
		}
		structured := false
		for _, re := range inline {
			var hit string
			for _, l := range lines {
				if re.MatchString(l) {
					hit = l
					break
				}
			}
			if hit != "" && len(out) < most {
				if text := strings.TrimSpace(listMark.ReplaceAllString(hit, "")); protocol.UTF16Len(text) > 20 {
					save("Recommendation: "+cut(text, 300), "important", false)
					structured = true
					break
				}
			}
		}
		if ulen >= 30 && ulen <= 500 && len(out) < most {
			captured := false
			for _, f := range out {
				for _, p := range []string{"User preference:", "Correction from user:", "Decision:"} {
					captured = captured || strings.HasPrefix(f.Content, p)
				}
			}
			if !captured {
				save("User asked: "+cut(user, 300), "temporary", false)
				structured = true
			}
		}
		heading := ""
		for _, l := range lines {
			if strings.HasPrefix(l, "#") {
				heading = hashes.ReplaceAllString(l, "")
				break
			}
		}
		if alen > 500 {
			var bullets []string
			for _, l := range lines {
				if !bulletLine.MatchString(l) {
					continue
				}
				b := strings.TrimSpace(bulletMark.ReplaceAllString(l, ""))
				if n := protocol.UTF16Len(b); n > 15 && n < 300 {
					bullets = append(bullets, b)
				}
			}
			if len(bullets) >= 2 && len(out) < most {
				prefix := "Key points: "
				if heading != "" {
					prefix = heading + ": "
				}
				save(prefix+cut(strings.Join(first(bullets, 3), "; "), 400), "normal", false)
				structured = true
			}
		}
		if !structured && alen > 500 && len(out) == 0 {
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
			save("Work completed: "+cut(summary, 300), "normal", false)
		}
	}
	return out
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// Step is the step text reporting n saved memories.
func Step(n int) string {
	if n == 1 {
		return "Auto-saved 1 memory from this exchange."
	}
	return "Auto-saved " + strconv.Itoa(n) + " memories from this exchange."
}
