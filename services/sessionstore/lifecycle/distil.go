package lifecycle

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
)

// Steps that write a frame (undo deletes it).
const (
	// StepDistil writes one important frame for a finished session.
	StepDistil = "distil"
	// StepDaily writes one frame for a workspace's UTC day of sessions.
	StepDaily = "daily"
)

// Tags of the frames the distil and daily steps write.
const (
	TagDistilled = "distilled"
	TagDaily     = "daily-summary"
)

// Session is one session as the distil step reads it: its workspace and
// its listing entry, the summary a listing would generate included.
type Session struct {
	Workspace string
	Info      protocol.SessionInfo
}

// SessionSource lists the sessions of every workspace last active at or
// after since, without writing to any of them (the store's listing writes
// lazy summaries back; reading for memory must not).
type SessionSource func(ctx context.Context, since time.Time) ([]Session, error)

// Distillation limits. A frame's text is capped so one session cannot
// fill the prompt's preloaded memories; a day lists at most
// maxDaySessions titles.
const (
	maxDistilRunes = 600
	maxDaySessions = 20
	// minDistilMessages is the fewest messages a session without a
	// summary needs to be distilled (the listing's lazy-summary rule).
	minDistilMessages = 4
)

// distilled is what the log says the distil and daily steps did, at any
// time: "once per session" holds forever, not just for the undo window.
type distilled struct {
	made   map[string]bool // distilKey(mind, step:of): not made again
	undone map[string]bool // distilKey(mind, step:of): undone by a user
}

func distilKey(mind, of string) string { return mind + "\x00" + of }

// made reads the whole log for StepDistil and StepDaily records: unlike
// the undo window, "once per session" holds forever.
func (w *Worker) made() (distilled, error) {
	f, err := os.Open(filepath.Join(w.cfg.DataDir, LogFile))
	out := distilled{made: map[string]bool{}, undone: map[string]bool{}}
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return distilled{}, fmt.Errorf("lifecycle: read log: %w", err)
	}
	defer f.Close()
	byID := map[string]string{} // mind+frame id → its key
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Change
		if json.Unmarshal(sc.Bytes(), &c) != nil || c.Of == "" {
			continue
		}
		switch c.Step {
		case StepDistil, StepDaily:
			k := distilKey(c.Mind, c.Step+":"+c.Of)
			out.made[k] = true
			byID[distilKey(c.Mind, c.ID)] = k
		case StepUndo:
			if k, ok := byID[distilKey(c.Mind, c.ID)]; ok {
				out.undone[k] = true
			}
		}
	}
	return out, sc.Err()
}

// distil runs the distil and daily steps (w.mu held).
func (w *Worker) distil(ctx context.Context, now time.Time) ([]Change, error) {
	if w.cfg.Sessions == nil {
		return nil, nil
	}
	ss, err := w.cfg.Sessions(ctx, now.Add(-w.cfg.DistilWithin))
	if err != nil {
		return nil, fmt.Errorf("lifecycle: sessions: %w", err)
	}
	done, err := w.made()
	if err != nil {
		return nil, err
	}
	type dayKey struct{ ws, day string }
	days := map[dayKey][]Session{}
	today := now.UTC().Format(time.DateOnly)
	var out []Change
	for _, s := range ss {
		last, err := time.Parse(time.RFC3339Nano, s.Info.LastActive)
		if err != nil || now.Sub(last) < w.cfg.FinishedAfter || now.Sub(last) > w.cfg.DistilWithin {
			continue // still going, or from before the look-back
		}
		summary := ""
		if s.Info.Summary != nil {
			summary = strings.TrimSpace(*s.Info.Summary)
		}
		if summary == "" && s.Info.MessageCount < minDistilMessages {
			continue // too little to remember
		}
		m := frames.Mind{Kind: frames.KindWorkspace, ID: s.Workspace}
		content := sessionText(s, last, summary)
		if !injection.Scan(content, injection.ToolOutput).Safe() {
			// A session that reads as instructions is not preloaded
			// into every later prompt of the workspace.
			w.log.Debug("memory lifecycle: session not distilled (flagged)", "mind", m.Key(), "session", s.Info.ID)
			continue
		}
		key := distilKey(m.Key(), StepDistil+":"+s.Info.ID)
		if done.undone[key] {
			continue // the user did not want it remembered
		}
		if day := last.UTC().Format(time.DateOnly); day != today {
			k := dayKey{s.Workspace, day}
			days[k] = append(days[k], s)
		}
		if done.made[key] {
			continue
		}
		c, ok, err := w.write(ctx, m, StepDistil, s.Info.ID, content, protocol.ImportanceImportant, []string{TagDistilled}, now)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, c)
		}
	}
	// One frame per workspace and finished UTC day, in a stable order.
	keys := make([]dayKey, 0, len(days))
	for k := range days {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b dayKey) int { return strings.Compare(a.ws+"\x00"+a.day, b.ws+"\x00"+b.day) })
	for _, k := range keys {
		m := frames.Mind{Kind: frames.KindWorkspace, ID: k.ws}
		if done.made[distilKey(m.Key(), StepDaily+":"+k.day)] {
			continue
		}
		content := dayText(k.day, days[k])
		if !injection.Scan(content, injection.ToolOutput).Safe() {
			continue // titles that together read as instructions
		}
		c, ok, err := w.write(ctx, m, StepDaily, k.day, content, protocol.ImportanceNormal, []string{TagDaily}, now)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// frameID is the id of the frame step makes of of in mind: the same in
// every process, so a store that takes over the lead (with its own log)
// finds a frame another made instead of writing a second.
func frameID(mind, step, of string) string {
	sum := sha256.Sum256([]byte(mind + "\x00" + step + "\x00" + of))
	return "mem-" + step + "-" + hex.EncodeToString(sum[:16])
}

// write adds a frame, then logs and counts the step (w.mu held). A frame
// the mind already holds word for word is not added again; the step is
// logged without an id, so undo never deletes what a user saved. ok is
// false when the frame exists already (another process made it).
func (w *Worker) write(ctx context.Context, m frames.Mind, step, of, content, importance string, tags []string, now time.Time) (c Change, ok bool, err error) {
	id := frameID(m.Key(), step, of)
	if _, err := w.cfg.Backend.Get(ctx, m, id); err == nil {
		return Change{}, false, nil
	} else if !errors.Is(err, frames.ErrNotFound) {
		return Change{}, false, fmt.Errorf("lifecycle: %s %s in %s: %w", step, of, m.Key(), err)
	}
	ts := protocol.Timestamp(now)
	f := frames.Frame{ID: id, Content: content, Tags: tags, Importance: importance,
		Source: protocol.SourceSystem, Created: ts, Updated: ts}
	saved, dup, err := w.cfg.Backend.Add(ctx, m, f)
	if err != nil {
		return Change{}, false, fmt.Errorf("lifecycle: %s %s in %s: %w", step, of, m.Key(), err)
	}
	c = Change{Step: step, Mind: m.Key(), ID: saved.ID, To: importance, Of: of, At: ts}
	if dup {
		c.ID = ""
	}
	w.record(c)
	return c, true, nil
}

// sessionText is a distilled session's frame: what it was called, when it
// ended, and its summary (the original's DistillableSession: summary and
// date).
func sessionText(s Session, last time.Time, summary string) string {
	text := fmt.Sprintf("Session %q (%s)", title(s.Info), last.UTC().Format(time.DateOnly))
	if summary != "" {
		text += ": " + summary
	} else {
		text += fmt.Sprintf(": %d messages", s.Info.MessageCount)
	}
	return clip(text, maxDistilRunes)
}

// dayText is a day summary's frame: the day and its sessions' titles.
func dayText(day string, ss []Session) string {
	slices.SortFunc(ss, func(a, b Session) int { return strings.Compare(a.Info.LastActive, b.Info.LastActive) })
	titles := make([]string, 0, min(len(ss), maxDaySessions))
	for _, s := range ss[:min(len(ss), maxDaySessions)] {
		titles = append(titles, fmt.Sprintf("%q", title(s.Info)))
	}
	more := ""
	if len(ss) > maxDaySessions {
		more = fmt.Sprintf(" and %d more", len(ss)-maxDaySessions)
	}
	noun := "sessions"
	if len(ss) == 1 {
		noun = "session"
	}
	return clip(fmt.Sprintf("Daily summary %s: %d %s: %s%s", day, len(ss), noun, strings.Join(titles, "; "), more), maxDistilRunes)
}

// title is a listing title as text (a meta title may be any JSON value).
func title(info protocol.SessionInfo) string {
	switch t := info.Title.(type) {
	case string:
		return t
	case nil:
		return info.ID
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
