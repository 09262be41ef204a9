package agent

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// MaxContextMessages is how many history messages reach the model before
// older ones are replaced by a summary.
const MaxContextMessages = 50

var (
	decisionPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bdecid`),
		regexp.MustCompile(`(?i)\bagreed\b`),
		regexp.MustCompile(`(?i)\bchose\b`),
		regexp.MustCompile(`(?i)\bselected\b`),
		regexp.MustCompile(`(?i)\bwent with\b`),
		regexp.MustCompile(`(?i)\bfinal call\b`),
	}
	sentenceEnd = regexp.MustCompile(`[.!?\n]`)
)

// ApplyContextWindow keeps the newest max messages of history and, when it
// dropped any, puts a system message summarising them first, so the result
// has max+1 messages. A history that fits is returned unchanged. max ≤ 0
// means MaxContextMessages.
func ApplyContextWindow(history []protocol.Message, max int) []protocol.Message {
	if max <= 0 {
		max = MaxContextMessages
	}
	if len(history) <= max {
		return history
	}
	dropped := history[:len(history)-max]
	out := make([]protocol.Message, 0, max+1)
	out = append(out, protocol.Message{
		Role: protocol.RoleSystem,
		Content: fmt.Sprintf("[Context summary — %d earlier messages compressed]\n%s",
			len(dropped), SummarizeDroppedContext(dropped)),
	})
	return append(out, history[len(history)-max:]...)
}

// SummarizeDroppedContext condenses messages leaving the context window
// into the decisions they record and the requests the user made, without
// calling a model.
func SummarizeDroppedContext(dropped []protocol.Message) string {
	var decisions, requests []string
	for _, m := range dropped {
		if m.Content == "" || protocol.UTF16Len(m.Content) < 10 {
			continue
		}
		if isDecision(m.Content) {
			first := strings.TrimSpace(sentenceEnd.Split(m.Content, 2)[0])
			if n := protocol.UTF16Len(first); n > 10 && n < 200 {
				decisions = append(decisions, first)
			}
		}
		if m.Role == protocol.RoleUser {
			line := strings.TrimSpace(strings.SplitN(m.Content, "\n", 2)[0])
			if n := protocol.UTF16Len(line); n > 15 && n < 150 {
				requests = append(requests, line)
			}
		}
	}
	var lines []string
	if len(decisions) > 0 {
		lines = append(lines, "Decisions made: "+strings.Join(decisions[:min(len(decisions), 5)], " | "))
	}
	if len(requests) > 0 {
		arc := requests
		if len(requests) > 4 {
			arc = []string{requests[0], requests[1], "...", requests[len(requests)-2], requests[len(requests)-1]}
		}
		lines = append(lines, "Topics discussed: "+strings.Join(arc, " → "))
	}
	if len(lines) == 0 {
		return fmt.Sprintf("%d messages covering earlier conversation context.", len(dropped))
	}
	return strings.Join(lines, "\n")
}

func isDecision(s string) bool {
	for _, re := range decisionPatterns {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
