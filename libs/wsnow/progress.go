package wsnow

import (
	"regexp"
	"strings"
	"unicode/utf8"

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

// maxScanBytes bounds how much of one message the patterns read: the
// scan runs on every briefing's changed transcripts, and a pasted log or a
// long generated reply must not cost a turn megabytes of regular
// expression work. Progress statements sit near a message's start.
const maxScanBytes = 4096

// TranscriptProgress finds progress items in transcripts (newest session
// first): completions and blockers in any message, tasks in the user's
// only (the agent does not assign work), one of each kind per message at
// most, each text once. Text that reads as injected instructions is left
// out: these items reach every later turn's system prompt.
func TranscriptProgress(ts []Transcript) []protocol.ProgressItem {
	lists := make([][]protocol.ProgressItem, 0, min(MaxTranscripts, len(ts)))
	for _, t := range ts[:min(MaxTranscripts, len(ts))] {
		lists = append(lists, ScanTranscript(t))
	}
	return MergeProgress(lists)
}

// ScanTranscript is one transcript's part of TranscriptProgress: its
// items in message order, cleaned and screened but not yet deduplicated
// against other transcripts. It depends on the transcript alone, so a
// caller may keep the result while the transcript's start is unchanged.
func ScanTranscript(t Transcript) []protocol.ProgressItem {
	out := []protocol.ProgressItem{}
	msgs := t.Messages[:min(MaxTranscriptMessages, len(t.Messages))]
	if len(msgs) < minTranscriptMessages {
		return out
	}
	date := day(t.Created)
	add := func(typ, text string) {
		text = strings.TrimRight(strings.TrimSpace(text), ".!,;")
		if r := []rune(text); len(r) > progressChars {
			text = string(r[:progressChars])
		}
		if len([]rune(text)) < minProgressChars || injection.Scan(text, injection.ToolOutput).Blocked() {
			return
		}
		out = append(out, protocol.ProgressItem{Type: typ, Content: text, Date: date})
	}
	for _, m := range msgs {
		if m.Content == "" || m.Role == "" {
			continue
		}
		content := scanPrefix(m.Content)
		if text, ok := firstMatch(completedPatterns, content); ok {
			add("completed", text)
		}
		if text, ok := firstMatch(blockerPatterns, content); ok {
			add("blocker", text)
		}
		if m.Role != "user" {
			continue
		}
		if text, ok := firstMatch(taskPatterns, content); ok {
			add("task", text)
		}
	}
	return out
}

// MergeProgress joins ScanTranscript results (newest transcript first)
// into TranscriptProgress's answer: each text once, compared on its
// first progressKeyChars characters regardless of case.
func MergeProgress(lists [][]protocol.ProgressItem) []protocol.ProgressItem {
	out := []protocol.ProgressItem{}
	seen := map[string]bool{}
	for _, items := range lists[:min(MaxTranscripts, len(lists))] {
		for _, it := range items {
			key := strings.ToLower(it.Content)
			if r := []rune(key); len(r) > progressKeyChars {
				key = string(r[:progressKeyChars])
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, it)
		}
	}
	return out
}

// scanPrefix is at most the first maxScanBytes of s, cut on a rune
// boundary.
func scanPrefix(s string) string {
	if len(s) <= maxScanBytes {
		return s
	}
	cut := maxScanBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
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
