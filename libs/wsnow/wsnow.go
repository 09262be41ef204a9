// Package wsnow computes a workspace's "Workspace Now" briefing from its
// sessions and frames, and formats it for the agent's system prompt and
// the /catchup and /now commands.
package wsnow

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Limits of the briefing (the original's).
const (
	maxMemories  = 8
	maxDecisions = 5
	maxThreads   = 5
	maxProgress  = 10
	maxPending   = 5
	maxNext      = 3
	memoryChars  = 200
	decisionLen  = 150
	titleChars   = 50
)

// Input is what a briefing is computed from.
type Input struct {
	Workspace protocol.Workspace
	// Sessions are the workspace's sessions, most recently active first.
	Sessions []protocol.SessionInfo
	// Frames are the workspace mind's frames, newest first (a bounded
	// window of them); MemoryCount is how many the mind holds in all.
	Frames      []protocol.MemoryFrame
	MemoryCount int
	// TranscriptItems are the progress items of the newest conversations'
	// starts (ScanTranscript of each, newest first), for progress the
	// frames do not record.
	TranscriptItems [][]protocol.ProgressItem
	Now             time.Time
}

var (
	decisionLike = regexp.MustCompile(`(?i)^decision|\bdecided\b|\bdecision made\b|\bchose |\bselected |\bagreed `)
	progressLike = regexp.MustCompile(`(?i)^(task|todo|to do|next step|blocker|blocked|done|completed)\s*:\s*(.+)`)
	workLike     = regexp.MustCompile(`(?i)project|workspace|working on`)
)

// Build computes the briefing.
func Build(in Input) protocol.WorkspaceNow {
	ws := in.Workspace
	live := make([]protocol.MemoryFrame, 0, len(in.Frames))
	for _, f := range in.Frames {
		if f.Importance != protocol.ImportanceDeprecated && f.Importance != protocol.ImportanceTemporary {
			live = append(live, f)
		}
	}
	out := protocol.WorkspaceNow{
		Workspace:         protocol.WorkspaceBrief{ID: ws.ID, Name: ws.Name, Group: ws.Group, Model: ws.Model, Directory: ws.Directory, PersonaID: ws.Persona},
		RecentThreads:     threads(in.Sessions),
		RecentDecisions:   decisions(live),
		RecentMemories:    memories(live),
		ProgressItems:     progress(live, in.TranscriptItems),
		Stats:             protocol.WorkspaceCounts{MemoryCount: in.MemoryCount, SessionCount: len(in.Sessions)},
		PendingTasks:      []string{},
		UpcomingSchedules: []string{},
	}
	for _, p := range out.ProgressItems {
		if (p.Type == "task" || p.Type == "blocker") && len(out.PendingTasks) < maxPending {
			out.PendingTasks = append(out.PendingTasks, p.Content)
		}
	}
	out.LastActive = ws.Created
	if len(out.RecentThreads) > 0 {
		out.LastActive = out.RecentThreads[0].LastActive
	}
	out.Summary = summary(ws.Name, live, in.MemoryCount, len(in.Sessions), in.Now)
	out.Greeting = greeting(out.LastActive, in.MemoryCount, len(in.Sessions), in.Now)
	out.SuggestedPrompts = suggestions(out, ws.Directory != "")
	out.NextActions = nextActions(out)
	return out
}

func day(ts string) string {
	if len(ts) >= 10 {
		return ts[:10]
	}
	return "unknown"
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

func threads(sessions []protocol.SessionInfo) []protocol.ThreadBrief {
	out := []protocol.ThreadBrief{}
	for _, s := range sessions {
		if s.MessageCount == 0 {
			continue
		}
		title, _ := s.Title.(string)
		if strings.TrimSpace(title) == "" {
			title = s.ID
		}
		out = append(out, protocol.ThreadBrief{ID: s.ID, Title: cut(title, titleChars), LastActive: s.LastActive})
		if len(out) == maxThreads {
			break
		}
	}
	return out
}

func rank(importance string) int {
	switch importance {
	case protocol.ImportanceCritical:
		return 0
	case protocol.ImportanceImportant:
		return 1
	case protocol.ImportanceNormal:
		return 2
	}
	return 3
}

// memories are the most important frames, newest first within an importance.
func memories(frames []protocol.MemoryFrame) []protocol.MemoryBrief {
	sorted := slices.Clone(frames)
	slices.SortStableFunc(sorted, func(a, b protocol.MemoryFrame) int { return cmp.Compare(rank(a.Importance), rank(b.Importance)) })
	out := []protocol.MemoryBrief{}
	for _, f := range sorted[:min(maxMemories, len(sorted))] {
		out = append(out, protocol.MemoryBrief{Content: cut(f.Content, memoryChars), Importance: f.Importance, Date: day(f.Created)})
	}
	return out
}

func decisions(frames []protocol.MemoryFrame) []protocol.DatedText {
	out := []protocol.DatedText{}
	for _, f := range frames {
		if !decisionLike.MatchString(f.Content) && f.Importance != protocol.ImportanceCritical {
			continue
		}
		text := strings.TrimSuffix(cut(firstLine(f.Content), decisionLen), ".")
		out = append(out, protocol.DatedText{Content: text, Date: day(f.Created)})
		if len(out) == maxDecisions {
			break
		}
	}
	return out
}

// progress is the frames' explicit progress notes ("Task: …"), then what
// the transcripts show, each text once, at most maxProgress.
func progress(frames []protocol.MemoryFrame, transcripts [][]protocol.ProgressItem) []protocol.ProgressItem {
	out := fromFrames(frames)
	for _, p := range MergeProgress(transcripts) {
		if len(out) == maxProgress {
			break
		}
		if !slices.ContainsFunc(out, func(o protocol.ProgressItem) bool { return strings.EqualFold(o.Content, p.Content) }) {
			out = append(out, p)
		}
	}
	return out
}

func fromFrames(frames []protocol.MemoryFrame) []protocol.ProgressItem {
	out := []protocol.ProgressItem{}
	for _, f := range frames {
		m := progressLike.FindStringSubmatch(firstLine(f.Content))
		if m == nil {
			continue
		}
		typ := "task"
		switch strings.ToLower(m[1]) {
		case "blocker", "blocked":
			typ = "blocker"
		case "done", "completed":
			typ = "completed"
		}
		out = append(out, protocol.ProgressItem{Type: typ, Content: cut(strings.TrimSpace(m[2]), decisionLen), Date: day(f.Created)})
		if len(out) == maxProgress {
			break
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// summary says what the workspace is about (its most important frame)
// and how active it is.
func summary(name string, frames []protocol.MemoryFrame, memoryCount, sessions int, now time.Time) string {
	if len(frames) == 0 {
		return fmt.Sprintf("Everything you discuss in %s stays in context — decisions, research, and progress are remembered across sessions.", name)
	}
	about := frames[0]
	if i := slices.IndexFunc(frames, func(f protocol.MemoryFrame) bool { return rank(f.Importance) <= 1 }); i >= 0 {
		about = frames[i]
	} else if i := slices.IndexFunc(frames, func(f protocol.MemoryFrame) bool { return workLike.MatchString(f.Content) }); i >= 0 {
		about = frames[i]
	}
	var parts []string
	if line := strings.TrimSuffix(cut(firstLine(about.Content), 140), "."); len(line) > 10 {
		parts = append(parts, line+".")
	}
	counts := plural(memoryCount, "memory", "memories") + " across " + plural(sessions, "session", "sessions")
	switch d := daysSince(frames[0].Created, now); {
	case d <= 0:
		parts = append(parts, "Active today with "+counts+".")
	case d == 1:
		parts = append(parts, "Last active yesterday. "+counts+".")
	case d <= 7:
		parts = append(parts, fmt.Sprintf("Last active %d days ago. %s.", d, counts))
	default:
		parts = append(parts, fmt.Sprintf("Last active %s. %s.", day(frames[0].Created), counts))
	}
	return strings.Join(parts, " ")
}

func daysSince(ts string, now time.Time) int {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return 0
	}
	return int(now.Sub(t).Hours() / 24)
}

func greeting(lastActive string, memoryCount, sessions int, now time.Time) string {
	if memoryCount == 0 && sessions == 0 {
		return "Welcome — anything you discuss here will be remembered."
	}
	if d := daysSince(lastActive, now); d >= 2 {
		return fmt.Sprintf("You've been away %d days. Here's what happened:", d)
	}
	return "Here's where things stand:"
}

func suggestions(n protocol.WorkspaceNow, hasDir bool) []string {
	if n.Stats.MemoryCount == 0 && n.Stats.SessionCount == 0 {
		return []string{"Tell me about this project so I can remember it", "Help me think through what to work on first", "What can you do in this workspace?"}
	}
	var out []string
	if len(n.RecentThreads) > 0 {
		out = append(out, "Continue: "+cut(n.RecentThreads[0].Title, 40))
	}
	out = append(out, "Catch me up on this workspace")
	if len(n.RecentDecisions) > 0 {
		out = append(out, "Review recent decisions and next steps")
	} else {
		out = append(out, "What matters here now?")
	}
	if slices.ContainsFunc(n.ProgressItems, func(p protocol.ProgressItem) bool { return p.Type == "blocker" }) {
		out = append(out, "What's blocking us right now?")
	} else {
		out = append(out, "What should I do next?")
	}
	if hasDir {
		out = append(out, "What files are in this workspace?")
	} else {
		out = append(out, "Draft an update from what we know")
	}
	return out
}

// nextActions are derived: blockers first, then open tasks, then the
// latest decision to follow up on.
func nextActions(n protocol.WorkspaceNow) []string {
	out := []string{}
	for _, typ := range []string{"blocker", "task"} {
		for _, p := range n.ProgressItems {
			if p.Type == typ && len(out) < maxNext {
				verb := "Continue: "
				if typ == "blocker" {
					verb = "Resolve: "
				}
				out = append(out, verb+p.Content)
			}
		}
	}
	if len(out) == 0 && len(n.RecentDecisions) > 0 {
		out = append(out, "Follow up on: "+n.RecentDecisions[0].Content)
	}
	return out
}

// Format is the briefing as a Markdown block for the system prompt and
// the commands, or "" for a workspace with nothing to tell yet.
func Format(n protocol.WorkspaceNow) string {
	if len(n.RecentMemories) == 0 && len(n.RecentThreads) == 0 {
		return ""
	}
	name := cmp.Or(n.Workspace.Name, n.Workspace.ID)
	var b strings.Builder
	fmt.Fprintf(&b, "# Workspace Now — %s\n", name)
	if len(n.RecentMemories) > 0 {
		// Without memories the summary is the web app's onboarding line.
		fmt.Fprintf(&b, "\n%s\n", n.Summary)
	}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n", title)
		for _, l := range lines {
			b.WriteString("- " + l + "\n")
		}
	}
	var ds, ts, ps []string
	for _, d := range n.RecentDecisions[:min(3, len(n.RecentDecisions))] {
		ds = append(ds, d.Content+" ("+d.Date+")")
	}
	for _, t := range n.RecentThreads[:min(3, len(n.RecentThreads))] {
		ts = append(ts, t.Title+" (last active "+day(t.LastActive)+")")
	}
	for _, p := range n.ProgressItems[:min(5, len(n.ProgressItems))] {
		ps = append(ps, p.Type+": "+p.Content)
	}
	section("Recent Decisions", ds)
	section("Active Threads", ts)
	section("Progress", ps)
	section("Likely Next Actions", n.NextActions)
	return strings.TrimRight(b.String(), "\n")
}
