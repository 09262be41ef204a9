// Package preload picks, from a mind's newest frames, those an agent
// turn's system prompt carries on every turn — the workspace's important
// frames, the user's preferences and style notes, their corrections — and
// the workspace's part of a catch-up's recall. The session store picks
// them when it answers a turn's context (protocol.LoadTurnContext), so a
// turn receives the few frames it uses, not the 200 they are chosen from.
package preload

import (
	"regexp"
	"slices"
	"strings"

	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
)

// Sizes (the original's where it had them).
const (
	// Window is how many of the newest frames (workspace and personal
	// mind together) the picks are chosen from.
	Window = 200
	// RecallPerMind is how many recalled frames each mind contributes.
	RecallPerMind = 10
	// MaxRecent, MaxPreferences and MaxCorrections cap the preloaded
	// sections.
	MaxRecent      = 8
	MaxPreferences = 5
	MaxCorrections = 5
	// CatchUpRecent is how many of the newest frames a catch-up adds to
	// the important ones; CatchUpPersonal how many personal hits it keeps.
	CatchUpRecent   = 3
	CatchUpPersonal = 2
)

// Frame prefixes the memory uses for what the user asked for (written by
// auto-save and the agent).
const (
	PrefixPreference = "User preference:"
	PrefixCorrection = "Correction from user:"
	PrefixStyle      = "Style note:"
	PrefixTopic      = "Workspace topic:"
)

// Picks are the preloaded sections of a turn's prompt.
type Picks = protocol.TurnPreload

// Pick picks, from frames newest first, the workspace's important
// frames, the user's preference and style notes and their corrections.
// Deprecated frames and frames that read as injected instructions are
// left out: they would reach the system prompt on every turn.
func Pick(frames []protocol.MemoryFrame) Picks {
	var p Picks
	for _, f := range frames {
		if f.Importance == protocol.ImportanceDeprecated || injection.Scan(f.Content, injection.ToolOutput).Blocked() {
			continue
		}
		c := strings.TrimSpace(f.Content)
		switch {
		case strings.HasPrefix(c, PrefixCorrection):
			if len(p.Corrections) < MaxCorrections {
				p.Corrections = append(p.Corrections, f)
			}
		case strings.HasPrefix(c, PrefixPreference), strings.HasPrefix(c, PrefixStyle), strings.HasPrefix(c, PrefixTopic):
			if len(p.Preferences) < MaxPreferences {
				p.Preferences = append(p.Preferences, f)
			}
		case f.Mind == protocol.MindWorkspace && (f.Importance == protocol.ImportanceCritical || f.Importance == protocol.ImportanceImportant):
			if len(p.Recent) < MaxRecent {
				p.Recent = append(p.Recent, f)
			}
		}
	}
	return p
}

// catchUp matches messages that ask to be brought up to date (the
// original's list): recall then goes by importance and recency.
var catchUp = regexp.MustCompile(`(?i)\bcatch me up\b|\bwhere (?:are|were) we\b|\bwhat matters\b|\bwhat did we decide\b|\bwhere did we leave off\b|\bwhat['’]?s the status\b|\bwhat should i do\b|\bwhat['’]?s next\b|\bsummariz|\bbrief me\b|\bget me up to speed\b|\bwhat['’]?s going on\b|\bremind me\b`)

// IsCatchUp reports whether message asks to be caught up.
func IsCatchUp(message string) bool { return catchUp.MatchString(message) }

var decisionish = regexp.MustCompile(`(?i)^decision|decided`)

// CatchUp picks from frames (newest first) the workspace's critical,
// important and decision frames, most important first, then its newest
// non-temporary frames, each once: a catch-up's workspace recall.
func CatchUp(frames []protocol.MemoryFrame) []protocol.MemoryFrame {
	var key, newest []protocol.MemoryFrame
	for _, f := range frames {
		if f.Mind != protocol.MindWorkspace || f.Importance == protocol.ImportanceDeprecated {
			continue
		}
		if f.Importance == protocol.ImportanceCritical || f.Importance == protocol.ImportanceImportant || decisionish.MatchString(f.Content) {
			key = append(key, f)
		}
		if f.Importance != protocol.ImportanceTemporary && len(newest) < CatchUpRecent {
			newest = append(newest, f)
		}
	}
	rank := map[string]int{protocol.ImportanceCritical: 0, protocol.ImportanceImportant: 1}
	slices.SortStableFunc(key, func(a, b protocol.MemoryFrame) int {
		ra, okA := rank[a.Importance]
		rb, okB := rank[b.Importance]
		if !okA {
			ra = 2
		}
		if !okB {
			rb = 2
		}
		return ra - rb
	})
	out := key[:min(len(key), RecallPerMind)]
	for _, f := range newest {
		if len(out) == RecallPerMind {
			break
		}
		if !slices.ContainsFunc(out, func(o protocol.MemoryFrame) bool { return o.ID == f.ID }) {
			out = append(out, f)
		}
	}
	return out
}
