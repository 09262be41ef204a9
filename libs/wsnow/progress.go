package wsnow

import (
	"regexp"
	"strings"

	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
)

// Transcript progress: the original reads tasks, completions and blockers
// out of the workspace's recent conversations with conservative patterns
// (precision over recall; no model call).

// Bounds of the transcript scan (the original's): the newest sessions, and
// the first messages of each.
const (
	MaxTranscripts        = 5
	MaxTranscriptMessages = 40
	// minTranscriptMessages: shorter conversations are skipped.
	minTranscriptMessages = 2
	progressChars         = 120
	minProgressChars      = 10
	progressKeyChars      = 50
)

// Transcript is the start of one of the workspace's conversations.
type Transcript struct {
	Session string
	// Created is the session's creation time (RFC 3339); its day dates
	// the items.
	Created string
	// Messages are its first messages (at most MaxTranscriptMessages are
	// read).
	Messages []protocol.Message
}

var (
	taskPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:need to|should|TODO|must|have to|planning to|going to|will need to)\s+(.{10,120})`),
		regexp.MustCompile(`(?i)\b(?:next step|next steps|action item|follow.?up)[:.\s]+(.{10,120})`),
		regexp.MustCompile(`(?i)\b(?:let'?s|we should|we need to)\s+(.{10,120})`),
	}
	completedPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:completed|finished|done with|implemented|deployed|shipped|resolved|fixed|merged|closed)\s+(.{5,120})`),
		regexp.MustCompile(`(?i)\b(?:we|I)\s+(?:completed|finished|shipped|deployed|fixed|resolved|merged)\s+(.{5,120})`),
		regexp.MustCompile(`(?i)\b(?:that'?s done|all done|task complete|work complete)\b`),
	}
	blockerPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:blocked by|stuck on|waiting for|depends on|can'?t proceed|can'?t continue)\s+(.{5,120})`),
		regexp.MustCompile(`(?i)\b(?:blocker|blocking issue|impediment)[:.\s]+(.{5,120})`),
		regexp.MustCompile(`(?i)\b(?:problem is|issue is|risk is)\s+(.{5,120})`),
	}
)

// TranscriptProgress finds progress items in transcripts (newest session
// first): completions and blockers in any message, tasks in the user's
// only (the agent does not assign work), one of each kind per message at
// most, each text once. Text that reads as injected instructions is left
// out: these items reach every later turn's system prompt.
func TranscriptProgress(ts []Transcript) []protocol.ProgressItem {
	out := []protocol.ProgressItem{}
	seen := map[string]bool{}
	add := func(typ, text, date string) {
		text = strings.TrimRight(strings.TrimSpace(text), ".!,;")
		if r := []rune(text); len(r) > progressChars {
			text = string(r[:progressChars])
		}
		key := strings.ToLower(text)
		if r := []rune(key); len(r) > progressKeyChars {
			key = string(r[:progressKeyChars])
		}
		if len([]rune(text)) < minProgressChars || seen[key] || injection.Scan(text, injection.ToolOutput).Blocked() {
			return
		}
		seen[key] = true
		out = append(out, protocol.ProgressItem{Type: typ, Content: text, Date: date})
	}
	for _, t := range ts[:min(MaxTranscripts, len(ts))] {
		msgs := t.Messages[:min(MaxTranscriptMessages, len(t.Messages))]
		if len(msgs) < minTranscriptMessages {
			continue
		}
		date := day(t.Created)
		for _, m := range msgs {
			if m.Content == "" || m.Role == "" {
				continue
			}
			if text, ok := firstMatch(completedPatterns, m.Content); ok {
				add("completed", text, date)
			}
			if text, ok := firstMatch(blockerPatterns, m.Content); ok {
				add("blocker", text, date)
			}
			if m.Role != "user" {
				continue
			}
			if text, ok := firstMatch(taskPatterns, m.Content); ok {
				add("task", text, date)
			}
		}
	}
	return out
}

// firstMatch is the captured text of the first pattern that matches (the
// whole match for a pattern without a group).
func firstMatch(patterns []*regexp.Regexp, text string) (string, bool) {
	for _, p := range patterns {
		if m := p.FindStringSubmatch(text); m != nil {
			if len(m) > 1 && m[1] != "" {
				return m[1], true
			}
			return m[0], true
		}
	}
	return "", false
}
