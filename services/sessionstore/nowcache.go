package sessionstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// Workspace Now is part of every agent turn's context, and building it
// (the newest 200 frames of two minds, their count, the briefing itself)
// cost more than the rest of the context together. What it is built from
// changes far less often than turns ask for it: nowCache keeps each
// briefing with what it was built from — the workspace's record, its
// session listing, the versions of the minds it read — and a briefing is
// built again when any of them differs (from the frames kept with the
// same versions when only the sessions changed). Minds whose backend cannot tell
// their version (PostgreSQL, shared by several stores) are not cached.
// The briefing's only use of the clock is whole days ("3 days ago"): an
// entry is kept at most nowMaxAge, so a day's boundary shows within it.

// nowMaxAge bounds how long a briefing is reused.
const nowMaxAge = time.Minute

// maxCachedNows bounds the cache; when full it starts over.
const maxCachedNows = 1024

// nowKey names one briefing: a workspace without one of its sessions.
type nowKey struct {
	workspace, except string
}

// builtNow is one briefing and what it was built from. The session
// listing is kept as a digest: a workspace of thousands of sessions
// would otherwise keep a copy of its listing per session chatted in.
type builtNow struct {
	doc      workspaces.Doc
	sessions uint64
	minds    []uint64
	at       time.Time
	now      protocol.WorkspaceNow
}

// current reports whether b still describes the workspace.
func (b builtNow) current(doc workspaces.Doc, sessions uint64, minds []uint64, now time.Time) bool {
	age := now.Sub(b.at)
	return age >= 0 && age < nowMaxAge && slices.Equal(b.minds, minds) && b.sessions == sessions &&
		maps.EqualFunc(b.doc, doc, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}

// listingSeed keys listingDigest (per process: digests are never stored).
var listingSeed = maphash.MakeSeed()

// listingDigest is a 64-bit digest of everything a briefing reads of a
// session listing.
func listingDigest(sessions []protocol.SessionInfo) uint64 {
	var h maphash.Hash
	h.SetSeed(listingSeed)
	str := func(v string) {
		h.WriteString(v)
		h.WriteByte(0)
	}
	num := func(n int) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
	}
	for _, si := range sessions {
		str(si.ID)
		str(si.LastActive)
		str(si.Created)
		num(si.MessageCount)
		switch t := si.Title.(type) {
		case string:
			str(t)
		case nil:
			h.WriteByte(1)
		default:
			str(fmt.Sprint(t))
		}
		str(deref(si.Summary))
		if b := si.BranchOf; b != nil {
			str(b.Session)
			num(b.At)
		}
		h.WriteByte(2)
	}
	return h.Sum64()
}

func deref(s *string) string {
	if s == nil {
		return "\x00nil"
	}
	return *s
}

// mindFrames is the part of a briefing read from the minds: the
// workspace's newest frames and their count, at the minds' versions.
type mindFrames struct {
	minds  []uint64
	frames []protocol.MemoryFrame
	count  int
}

type nowCache struct {
	mu sync.Mutex
	m  map[nowKey]builtNow
	// frames is each workspace's mindFrames: a briefing whose sessions
	// changed (a turn in another session) is built again without
	// listing the frames again.
	frames map[string]mindFrames
}

// framesOf is workspace's frames read at versions minds.
func (c *nowCache) framesOf(workspace string, minds []uint64) (mindFrames, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.frames[workspace]
	return v, ok && slices.Equal(v.minds, minds)
}

func (c *nowCache) putFrames(workspace string, v mindFrames) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frames == nil || len(c.frames) >= maxCachedNows {
		c.frames = map[string]mindFrames{}
	}
	c.frames[workspace] = v
}

func (c *nowCache) get(k nowKey) (builtNow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *nowCache) put(k nowKey, v builtNow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedNows {
		c.m = map[nowKey]builtNow{}
	}
	c.m[k] = v
}

// forget drops a deleted workspace's briefings.
func (c *nowCache) forget(workspace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.workspace == workspace {
			delete(c.m, k)
		}
	}
	delete(c.frames, workspace)
}
