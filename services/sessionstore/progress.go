package sessionstore

import (
	"context"
	"slices"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/wsnow"
)

// Workspace Now's transcript progress reads the start of the newest few
// conversations on every briefing — on every turn. Only the first
// wsnow.MaxTranscriptMessages messages count, so a session that has that
// many never changes what it contributes: transcriptCache keeps those
// starts and a long session's file is read once per store process, not
// per turn. Shorter sessions are cheap to read and are read each time.

// maxCachedTranscripts bounds the cache; when full it starts over.
const maxCachedTranscripts = 4096

// transcriptKey names one session's start. Created is part of it: a
// session deleted and created again under the same id is a new one.
type transcriptKey struct {
	workspace, session, created string
}

type transcriptCache struct {
	mu sync.Mutex
	m  map[transcriptKey][]protocol.Message
}

func (c *transcriptCache) get(k transcriptKey) ([]protocol.Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs, ok := c.m[k]
	return msgs, ok
}

func (c *transcriptCache) put(k transcriptKey, msgs []protocol.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTranscripts {
		c.m = map[transcriptKey][]protocol.Message{}
	}
	c.m[k] = msgs
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

// transcripts reads the starts of the newest wsnow.MaxTranscripts
// sessions (most recently active first) with enough messages to count. A
// session that cannot be read is left out: the briefing is best effort.
func (s *Service) transcripts(ctx context.Context, workspace string, sessions []protocol.SessionInfo) []wsnow.Transcript {
	out := make([]wsnow.Transcript, 0, wsnow.MaxTranscripts)
	for _, si := range sessions {
		if len(out) == wsnow.MaxTranscripts {
			break
		}
		if si.MessageCount < 2 {
			continue
		}
		key := transcriptKey{workspace, si.ID, si.Created}
		msgs, ok := s.startsCache.get(key)
		if !ok {
			h, err := s.store.History(ctx, protocol.HistoryRequest{SessionRef: protocol.SessionRef{Workspace: workspace, Session: si.ID}})
			if err != nil {
				s.log.Warn("workspace now: transcript unreadable; left out", "workspace", workspace, "session", si.ID, "err", err)
				continue
			}
			msgs = slices.Clone(h.Messages[:min(wsnow.MaxTranscriptMessages, len(h.Messages))])
			if len(msgs) == wsnow.MaxTranscriptMessages {
				s.startsCache.put(key, msgs)
			}
		}
		out = append(out, wsnow.Transcript{Session: si.ID, Created: si.Created, Messages: msgs})
	}
	return out
}
