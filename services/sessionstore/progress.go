package sessionstore

import (
	"context"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/wsnow"
)

// Workspace Now's transcript progress scans the start of the newest few
// conversations on every briefing — on every model turn. What a session
// contributes depends only on its first wsnow.MaxTranscriptMessages
// messages, so transcriptCache keeps each session's scanned items with
// the listing state they were read at: a session is read and scanned
// again only when it changed (a message was added while it had fewer
// than that many), so a turn rescans at most the sessions written since
// the last briefing, not all five.

// maxCachedTranscripts bounds the cache; when full it starts over.
const maxCachedTranscripts = 4096

// transcriptKey names one session.
type transcriptKey struct {
	workspace, session string
}

// scanned is one session's scanned start and the listing state it
// reflects. Created is part of it: a session deleted and created again
// under the same id is a new one.
type scanned struct {
	created, lastActive string
	count               int
	items               []protocol.ProgressItem
}

// current reports whether s still describes the session si lists.
func (s scanned) current(si protocol.SessionInfo) bool {
	if s.created != si.Created {
		return false
	}
	if s.count >= wsnow.MaxTranscriptMessages {
		return true // its start is complete: later messages do not count
	}
	return s.count == si.MessageCount && s.lastActive == si.LastActive
}

type transcriptCache struct {
	mu sync.Mutex
	m  map[transcriptKey]scanned
}

func (c *transcriptCache) get(k transcriptKey) (scanned, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *transcriptCache) put(k transcriptKey, v scanned) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTranscripts {
		c.m = map[transcriptKey]scanned{}
	}
	c.m[k] = v
}

// forget drops a deleted workspace's entries.
func (c *transcriptCache) forget(workspace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.workspace == workspace {
			delete(c.m, k)
		}
	}
}

// transcriptItems is the scanned starts of the newest wsnow.MaxTranscripts
// sessions (most recently active first) with enough messages to count. A
// session that cannot be read is left out: the briefing is best effort.
func (s *Service) transcriptItems(ctx context.Context, workspace string, sessions []protocol.SessionInfo) [][]protocol.ProgressItem {
	out := make([][]protocol.ProgressItem, 0, wsnow.MaxTranscripts)
	for _, si := range sessions {
		if len(out) == wsnow.MaxTranscripts {
			break
		}
		if si.MessageCount < 2 {
			continue
		}
		key := transcriptKey{workspace, si.ID}
		if c, ok := s.startsCache.get(key); ok && c.current(si) {
			out = append(out, c.items)
			continue
		}
		h, err := s.store.History(ctx, protocol.HistoryRequest{SessionRef: protocol.SessionRef{Workspace: workspace, Session: si.ID}})
		if err != nil {
			s.log.Warn("workspace now: transcript unreadable; left out", "workspace", workspace, "session", si.ID, "err", err)
			continue
		}
		msgs := h.Messages[:min(wsnow.MaxTranscriptMessages, len(h.Messages))]
		items := wsnow.ScanTranscript(wsnow.Transcript{Session: si.ID, Created: si.Created, Messages: msgs})
		// The history read may be newer than the listing; the entry
		// records the listing's state so the next briefing compares like
		// with like (at worst it scans once more).
		s.startsCache.put(key, scanned{created: si.Created, lastActive: si.LastActive, count: max(si.MessageCount, len(msgs)), items: items})
		out = append(out, items)
	}
	return out
}
