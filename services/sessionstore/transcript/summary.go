package transcript

import (
	"regexp"

	"github.com/waggle-os/core/libs/protocol"
)

// noSummary is the summary field of a session that has none.
const noSummary = "No summary available"

var (
	savingMemoryRe = regexp.MustCompile(`(?i)Saving to memory`)
	generatingDoc  = regexp.MustCompile(`(?i)Generating document`)
)

// SessionSummary builds the post-session summary of session id. info is its
// listing entry (after any lazy summary was written, so info.Summary is the
// summary to show). Tool counts come from the recorded tool events; only a
// file without any falls back to the original's text patterns.
func SessionSummary(id string, f File, info protocol.SessionInfo) protocol.SessionSummary {
	s := protocol.SessionSummary{
		SessionID:    id,
		Title:        info.Title,
		MessageCount: info.MessageCount,
		Summary:      noSummary,
		LastActive:   info.LastActive,
		Created:      info.Created,
	}
	if info.Summary != nil {
		s.Summary = *info.Summary
	}
	heuristic := len(f.Tools) == 0
	for i := range f.info {
		l := &f.info[i]
		if l.kind != lineValue || l.isMeta {
			continue
		}
		switch l.role {
		case "user":
			s.UserMessages++
		case "assistant":
			s.AssistantMessages++
			if heuristic {
				for _, p := range toolPatterns {
					if p.re.MatchString(l.content) {
						s.ToolsUsed++
					}
				}
				if savingMemoryRe.MatchString(l.content) {
					s.MemoriesSaved++
				}
				if generatingDoc.MatchString(l.content) {
					s.DocumentsCreated++
				}
			}
		}
	}
	if !heuristic {
		for _, t := range f.Tools {
			if t.Status == "denied" {
				continue // never ran
			}
			s.ToolsUsed++
			if !toolSucceeded(t) {
				continue
			}
			switch t.Name {
			case "save_memory":
				s.MemoriesSaved++
			case "generate_docx", "generate_xlsx":
				s.DocumentsCreated++
			}
		}
	}
	return s
}
