package jsonl

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Bounds of the append keys kept in memory. A key matters while its
// sender may still resend (seconds: a store timeout), so a session keeps
// its latest keys only, and only the sessions appended to lately keep
// any; a session that fell out is read again from its file.
const (
	keysPerSession = 256
	keyedSessions  = 256
)

// MessageLine is a message as stored, with the key it was appended under.
type MessageLine struct {
	protocol.Message
	AppendKey string `json:"appendKey,omitempty"`
}

// LineOf is the stored line of an append request: its message or its tool
// event, with its key.
func LineOf(req protocol.AppendRequest) any {
	if req.Tool != nil {
		l := NewToolLine(*req.Tool)
		l.AppendKey = req.Key
		return l
	}
	return MessageLine{Message: *req.Message, AppendKey: req.Key}
}

// keyedLine is what a rebuild reads of a line.
type keyedLine struct {
	AppendKey string `json:"appendKey"`
	Timestamp string `json:"timestamp"`
}

var appendKeyMarker = []byte(`"appendKey"`)

// sessionKeys is the latest append keys of one session file, as of the
// file state it was read or written at.
type sessionKeys struct {
	path  string
	file  os.FileInfo // the file they belong to (a rewrite renames a new one in)
	size  int64       // its size after the last keyed append
	ts    map[string]string
	order []string // oldest first
	elem  *list.Element
}

func (k *sessionKeys) add(key, ts string) {
	if _, ok := k.ts[key]; ok {
		return
	}
	k.ts[key] = ts
	k.order = append(k.order, key)
	if len(k.order) > keysPerSession {
		delete(k.ts, k.order[0])
		k.order = k.order[1:]
	}
}

// keyCache holds the sessionKeys of the sessions appended to lately.
type keyCache struct {
	mu  sync.Mutex
	m   map[string]*sessionKeys
	lru *list.List // of *sessionKeys, most recent first
}

func (c *keyCache) get(path string) *sessionKeys {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.m[path]
	if k != nil {
		c.lru.MoveToFront(k.elem)
	}
	return k
}

func (c *keyCache) put(k *sessionKeys) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.lru = map[string]*sessionKeys{}, list.New()
	}
	if old := c.m[k.path]; old != nil {
		c.lru.Remove(old.elem)
	}
	k.elem = c.lru.PushFront(k)
	c.m[k.path] = k
	for c.lru.Len() > keyedSessions {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.m, last.Value.(*sessionKeys).path)
	}
}

// AppendKeyed is Append for a line with an append key: when the session
// holds a line appended under key already, nothing is written and it
// answers that line's timestamp and true. ts is the new line's timestamp.
// The keys are checked under the file's lock, so two concurrent appends
// of one key write one line.
func (s *Store) AppendKeyed(ws, session, key, ts string, line any) (stored string, dup bool, err error) {
	if key == "" {
		return ts, false, s.Append(ws, session, line)
	}
	path, err := s.Path(ws, session)
	if err != nil {
		return "", false, err
	}
	payload, err := EncodeLine(line)
	if err != nil {
		return "", false, fmt.Errorf("jsonl: encode line for %s/%s: %w", ws, session, err)
	}
	payload = append(payload, '\n')
	l := s.lock(path)
	defer s.unlock(path, l)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("jsonl: create sessions dir of %s: %w", ws, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("jsonl: open %s/%s: %w", ws, session, err)
	}
	defer f.Close()
	size, err := repairTail(f)
	if err != nil {
		return "", false, fmt.Errorf("jsonl: repair %s/%s: %w", ws, session, err)
	}
	st, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("jsonl: stat %s/%s: %w", ws, session, err)
	}
	keys := s.keys.get(path)
	if keys == nil || keys.size != size || !os.SameFile(keys.file, st) {
		// Never read, or written since by something else (a rewrite, an
		// append without a key, another process): read the keys again.
		if keys, err = readKeys(f, path, size); err != nil {
			return "", false, fmt.Errorf("jsonl: read keys of %s/%s: %w", ws, session, err)
		}
		keys.file = st
		s.keys.put(keys)
	}
	if prev, ok := keys.ts[key]; ok {
		return prev, true, nil
	}
	if size == 0 {
		meta, err := json.Marshal(NewMeta(nil, time.Now()))
		if err != nil {
			return "", false, fmt.Errorf("jsonl: encode meta: %w", err)
		}
		payload = append(append(meta, '\n'), payload...)
	}
	if err := writeTail(f, size, payload); err != nil {
		// The file is as it was; the cache stands.
		return "", false, fmt.Errorf("jsonl: append %s/%s: %w", ws, session, err)
	}
	keys.add(key, ts)
	keys.size = size + int64(len(payload))
	return ts, false, nil
}

// readKeys reads the append keys of the first size bytes of f, the latest
// keysPerSession of them. Only lines naming an appendKey are decoded.
func readKeys(f *os.File, path string, size int64) (*sessionKeys, error) {
	keys := &sessionKeys{path: path, size: size, ts: map[string]string{}}
	if size == 0 {
		return keys, nil
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	for len(data) > 0 {
		ln := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			ln, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if !bytes.Contains(ln, appendKeyMarker) {
			continue
		}
		var kl keyedLine
		if json.Unmarshal(ln, &kl) == nil && kl.AppendKey != "" {
			keys.add(kl.AppendKey, kl.Timestamp)
		}
	}
	return keys, nil
}
