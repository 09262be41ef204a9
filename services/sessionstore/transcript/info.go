package transcript

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// SessionInfo builds the listing entry of session id from its parsed file
// and modification time. Its Title is a string, except when a meta line
// holds a truthy non-string title: the original passed that value through
// as-is, and so do we (as its raw JSON). created is the meta line's created, not the file's
// birth time (which Go cannot read portably and the original often reported
// as the epoch); without one it falls back to mtime.
func SessionInfo(id string, f File, mtime time.Time) protocol.SessionInfo {
	info := protocol.SessionInfo{
		ID:           id,
		Title:        id,
		MessageCount: f.Count,
		LastActive:   protocol.Timestamp(mtime),
		Created:      protocol.Timestamp(mtime),
	}
	if f.Meta != nil {
		if f.meta.title != nil {
			info.Title = f.meta.title
		}
		if f.meta.summary != "" {
			s := f.meta.summary
			info.Summary = &s
		}
		if f.meta.created != "" {
			info.Created = f.meta.created
		}
		info.BranchOf = f.meta.branchOf
	}
	// The original compares with the id, so a meta title equal to the id is
	// also replaced by the derived one.
	if t, ok := info.Title.(string); ok && t == id {
		if derived, ok := f.derivedTitle(); ok {
			info.Title = derived
		}
	}
	return info
}

// derivedTitle is the title taken from the first message line: its content
// trimmed, cut to 50 UTF-16 units at the last space (when that space is past
// index 20) with "..." appended. ok is false when that line is malformed or
// has no content — the original looked at that one line only.
func (f *File) derivedTitle() (string, bool) {
	var title string
	var ok bool
	f.messageLines(func(l *lineInfo) bool {
		if l.kind == lineValue && l.content != "" {
			title, ok = shortTitle(l.content), true
		}
		return false
	})
	return title, ok
}

func shortTitle(content string) string {
	raw := jsTrim(content)
	if protocol.UTF16Len(raw) <= 50 {
		return raw
	}
	head := protocol.SliceUTF16(raw, 0, 50)
	cut := 50
	if i := strings.LastIndexByte(head, ' '); i >= 0 {
		if u := protocol.UTF16Len(head[:i]); u > 20 {
			cut = u
		}
	}
	return protocol.SliceUTF16(raw, 0, cut) + "..."
}

var (
	greetingRe  = regexp.MustCompile(`(?i)^(hi|hello|hey|yo|sup|thanks|thank you|ok|okay|yes|no|sure|cool|great|nice|good)\b`)
	sentenceRe  = regexp.MustCompile(`[.!?\n]`)
	boldRe      = regexp.MustCompile(`\*\*([^*]{3,30})\*\*`)
	decisionRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:decided|decision|let'?s go with|we(?:'ll| will) use|agreed)\b`),
		regexp.MustCompile(`(?i)\b(?:let'?s (?:proceed|move forward|do that))\b`),
	}
	filesRe    = regexp.MustCompile(`(?i)(?:created|wrote|edited|generated)\s+(?:file|document)`)
	researchRe = regexp.MustCompile(`(?i)(?:searched|found|researched|looked up)`)
	draftingRe = regexp.MustCompile(`(?i)(?:draft|wrote|composed|prepared)\b`)
)

type chatLine struct{ role, content string }

// Digest is QuickInfo with the summary a listing would show: a session of
// 4 or more messages without one gets GenerateSummary's, in memory only
// (nothing is written back).
func Digest(id string, data []byte, mtime time.Time) protocol.SessionInfo {
	info := QuickInfo(id, data, mtime)
	if info.Summary != nil || info.MessageCount < 4 {
		return info
	}
	if s, ok := GenerateSummary(Parse(data)); ok {
		info.Summary = &s
	}
	return info
}

// GenerateSummary is the heuristic, LLM-free session summary the listing
// writes back lazily, e.g. "Help me plan the Q2 marketing campaign — 6
// messages · decisions". ok is false for sessions under 4 message lines or
// with fewer than 2 messages among the first 30 lines. Tool-event lines are
// not message lines.
func GenerateSummary(f File) (string, bool) {
	if f.Count < 4 {
		return "", false
	}
	msgs := summaryMessages(f)
	if len(msgs) < 2 {
		return "", false
	}
	users, assistants := splitByRole(msgs)
	topic := summaryTopic(users)
	terms := boldTerms(assistants)
	activities := summaryActivities(msgs, assistants)

	var parts []string
	switch {
	case topic != "" && !greetingRe.MatchString(topic):
		parts = append(parts, topic)
	case len(terms) > 0:
		parts = append(parts, strings.Join(terms[:min(3, len(terms))], ", "))
	case topic != "":
		parts = append(parts, topic)
	}
	tail := strconv.Itoa(len(msgs)) + " messages"
	if len(activities) > 0 {
		tail += " · " + strings.Join(activities, ", ")
	}
	parts = append(parts, tail)
	return strings.Join(parts, " — "), true
}

// summaryMessages is the messages among the first 30 message lines: the
// original looks no further.
func summaryMessages(f File) []chatLine {
	var msgs []chatLine
	seen := 0
	f.messageLines(func(l *lineInfo) bool {
		if l.isMessage() {
			msgs = append(msgs, chatLine{l.role, l.content})
		}
		seen++
		return seen < 30
	})
	return msgs
}

func splitByRole(msgs []chatLine) (users, assistants []chatLine) {
	for _, m := range msgs {
		switch m.role {
		case "user":
			users = append(users, m)
		case "assistant":
			assistants = append(assistants, m)
		}
	}
	return users, assistants
}

// summaryTopic is the first sentence of the first user message that is
// more than a greeting (else of the first user message), cut to 80 units;
// "" without user messages.
func summaryTopic(users []chatLine) string {
	var from *chatLine
	for i := range users {
		if protocol.UTF16Len(users[i].content) > 15 && !greetingRe.MatchString(jsTrim(users[i].content)) {
			from = &users[i]
			break
		}
	}
	if from == nil && len(users) > 0 {
		from = &users[0]
	}
	if from == nil {
		return ""
	}
	first := jsTrim(sentenceRe.Split(from.content, 2)[0])
	return truncateEllipsis(first, 80, 77)
}

// boldTerms is the distinct **bold** terms (3 to 29 units) of the first
// five assistant messages, two per message at most, stopping once there
// are three.
func boldTerms(assistants []chatLine) []string {
	var terms []string
	for i, m := range assistants {
		if i == 5 {
			break
		}
		for _, span := range boldRe.FindAllString(m.content, 2) {
			term := jsTrim(strings.ReplaceAll(span, "**", ""))
			if n := protocol.UTF16Len(term); n > 2 && n < 30 && !slices.Contains(terms, term) {
				terms = append(terms, term)
			}
		}
		if len(terms) >= 3 {
			break
		}
	}
	return terms
}

// summaryActivities names what the conversation did (decisions, files,
// research, drafting), judged on all its messages' text.
func summaryActivities(msgs, assistants []chatLine) []string {
	all := make([]string, len(msgs))
	for i, m := range msgs {
		all[i] = m.content
	}
	joined := strings.Join(all, " ")
	var activities []string
	if decisionRes[0].MatchString(joined) || decisionRes[1].MatchString(joined) {
		activities = append(activities, "decisions")
	}
	if filesRe.MatchString(joined) {
		activities = append(activities, "files")
	}
	if researchRe.MatchString(joined) {
		activities = append(activities, "research")
	}
	if draftingRe.MatchString(joined) && anyLonger(assistants, 500) {
		activities = append(activities, "drafting")
	}
	return activities
}

func anyLonger(msgs []chatLine, n int) bool {
	for _, m := range msgs {
		if protocol.UTF16Len(m.content) > n {
			return true
		}
	}
	return false
}
