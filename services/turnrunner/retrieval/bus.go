package retrieval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// PersonalWorkspace is the workspace a run searches when it names none,
// names "personal", or names one the store does not know (reference §5.4:
// the personal mind). It is the store's default workspace.
const PersonalWorkspace = "default"

// DefaultBusTimeout bounds each store request of a BusSearcher.
const DefaultBusTimeout = 10 * time.Second

// BusSearcher is the Searcher over the session store: a workspace's
// memories (protocol.SearchMemory.Subject) and its sessions
// (protocol.SearchSessions.Subject), merged by score.
//
// Score is the share of the query's distinct terms (lower-cased runs of
// letters and digits) that the passage contains, so memories and session
// snippets rank on one scale from 0 to 1; a memory scores at least the
// relevance the store's hybrid search gave it, so one found by meaning
// alone (no shared term) is not ranked last.
// Ties keep memories before sessions and each source's own order.
//
// A searcher for a team-server user (ForUser) searches that user's
// personal mind beside the workspace, and for no workspace (or an unknown
// one) that personal mind alone, never the shared default workspace,
// which belongs to no team.
type BusSearcher struct {
	nc      *nats.Conn
	timeout time.Duration
	user    string
}

// NewBusSearcher returns a BusSearcher on nc whose store requests each take
// at most timeout (DefaultBusTimeout when 0).
func NewBusSearcher(nc *nats.Conn, timeout time.Duration) *BusSearcher {
	if timeout <= 0 {
		timeout = DefaultBusTimeout
	}
	return &BusSearcher{nc: nc, timeout: timeout}
}

// ForUser returns a searcher that searches for user (see BusSearcher);
// "" is the local user, who may search every workspace.
func (b *BusSearcher) ForUser(user string) *BusSearcher {
	c := *b
	c.user = user
	return &c
}

// Search implements Searcher. A source that is not there (no store
// responder, unknown workspace) contributes nothing; an error is returned
// only when both sources failed otherwise.
func (b *BusSearcher) Search(ctx context.Context, workspace, query string, limit int) ([]Passage, error) {
	ws, err := b.resolve(ctx, workspace)
	if err != nil {
		return nil, err
	}
	memReq := protocol.MemorySearchRequest{Workspace: ws, Query: query, Limit: limit, User: b.user}
	personalOnly := b.user != "" && ws == PersonalWorkspace
	if personalOnly {
		if strings.TrimSpace(query) == "" {
			// Without a query the store lists recent frames of the
			// workspace mind too; a user's run has none to list.
			return nil, nil
		}
		memReq.Scope = protocol.MindPersonal
	}
	mems, merr := bus.Call(ctx, b.nc, protocol.SearchMemory, memReq, bus.Within(b.timeout))
	var sess protocol.SessionSearchReply
	var serr error
	if !personalOnly && len([]rune(strings.TrimSpace(query))) >= 2 { // the session search's minimum
		sess, serr = bus.Call(ctx, b.nc, protocol.SearchSessions,
			protocol.SessionSearchRequest{Workspace: ws, Query: strings.TrimSpace(query), Limit: limit}, bus.Within(b.timeout))
	}
	merr, serr = absentIsEmpty(merr), absentIsEmpty(serr)
	if merr != nil && serr != nil {
		return nil, fmt.Errorf("retrieval: search %s: %w", ws, errors.Join(merr, serr))
	}

	terms := queryTerms(query)
	var out []Passage
	for _, m := range mems.Memories {
		if m.Content != "" {
			out = append(out, Passage{Source: "memory:" + m.ID, Content: m.Content, Score: max(m.Score, termScore(terms, m.Content, strings.Join(m.Tags, "\n")))})
		}
	}
	for _, s := range sess.Results {
		content := sessionPassage(s)
		out = append(out, Passage{Source: "session:" + s.SessionID, Content: content, Score: termScore(terms, content)})
	}
	slices.SortStableFunc(out, func(a, b Passage) int { return cmp.Compare(b.Score, a.Score) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// resolve maps a run's workspace to the one searched: the personal one
// unless a known workspace is named.
func (b *BusSearcher) resolve(ctx context.Context, workspace string) (string, error) {
	if workspace == "" || workspace == "personal" || workspace == PersonalWorkspace || !protocol.ValidID(workspace) {
		return PersonalWorkspace, nil
	}
	_, err := bus.Call(ctx, b.nc, protocol.GetWorkspace, protocol.WorkspaceRequest{Workspace: workspace}, bus.Within(b.timeout))
	switch {
	case err == nil:
		return workspace, nil
	case protocol.KindOf(err) == protocol.NotFound:
		return PersonalWorkspace, nil
	case errors.Is(err, protocol.ErrUnavailable):
		// No store to ask; the searches below will find that out too.
		return workspace, nil
	default:
		return "", fmt.Errorf("retrieval: look up workspace %s: %w", workspace, err)
	}
}

// absentIsEmpty treats a missing store or workspace as no results.
func absentIsEmpty(err error) error {
	if errors.Is(err, protocol.ErrUnavailable) || protocol.KindOf(err) == protocol.NotFound {
		return nil
	}
	return err
}

// sessionPassage renders a session hit: its title, then each snippet as
// "<role>: <text>".
func sessionPassage(s protocol.SessionSearchResult) string {
	var b strings.Builder
	if t, ok := s.Title.(string); ok && t != "" {
		fmt.Fprintf(&b, "Conversation %q", t)
	} else {
		b.WriteString("Conversation " + s.SessionID)
	}
	for _, sn := range s.Snippets {
		fmt.Fprintf(&b, "\n%s: %s", sn.Role, sn.Text)
	}
	return b.String()
}

// queryTerms are the distinct lower-cased runs of letters and digits of q.
func queryTerms(q string) []string {
	var terms []string
	for _, f := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !slices.Contains(terms, f) {
			terms = append(terms, f)
		}
	}
	return terms
}

// termScore is the share of terms found (case-insensitively) in any of texts.
func termScore(terms []string, texts ...string) float64 {
	if len(terms) == 0 {
		return 0
	}
	lower := strings.ToLower(strings.Join(texts, "\n"))
	n := 0
	for _, t := range terms {
		if strings.Contains(lower, t) {
			n++
		}
	}
	return float64(n) / float64(len(terms))
}
