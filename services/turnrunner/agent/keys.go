package agent

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The credential pool: config.json `apiKeys` lists several API keys for
// the model server, used in order. A key the server refuses (401) is put
// aside until the key list changes; a rate-limited key (429) rests for an
// hour, as the original's pool did. The loop moves to the next usable key
// at once, with the step RotatedKeyText, before any retry or fallback.
//
// Keys are secrets: they live in memory only, travel only in the
// Authorization header, and are cut out of every error text (ModelError)
// so they reach no log, event or client.

// RotatedKeyText is the step announcing a switch to the next key.
const RotatedKeyText = "API key rotated — retrying with next credential"

// Cooldowns of a failed key.
const (
	rateLimitCooldown = time.Hour
	maxKeyPools       = 16
)

// keyPool is the state of one key list: which keys are resting, and until
// when. It is shared by every turn that uses the same list.
type keyPool struct {
	mu       sync.Mutex
	keys     []string
	until    []time.Time
	disabled []bool
}

func newKeyPool(keys []string) *keyPool {
	return &keyPool{keys: keys, until: make([]time.Time, len(keys)), disabled: make([]bool, len(keys))}
}

// pick is the index of the key to use now: the first that is neither
// refused nor resting; when every key rests, the one that rests least
// (a request that may fail beats no request); when all were refused, the
// first (the user then sees the "invalid key" message).
func (p *keyPool) pick(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i := range p.keys {
		if p.disabled[i] {
			continue
		}
		if !now.Before(p.until[i]) {
			return i
		}
		if best < 0 || p.until[i].Before(p.until[best]) {
			best = i
		}
	}
	return max(best, 0)
}

// fail records that key i got status and returns the next usable key
// after it, if there is one. Only 401 and 429 rotate: other failures say
// nothing about the key.
func (p *keyPool) fail(i, status int, now time.Time) (next int, ok bool) {
	if !rotates(status) {
		return i, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.keys) {
		return i, false
	}
	if status == http.StatusUnauthorized {
		p.disabled[i] = true
	} else {
		p.until[i] = now.Add(rateLimitCooldown)
	}
	for d := 1; d < len(p.keys); d++ {
		j := (i + d) % len(p.keys)
		if !p.disabled[j] && !now.Before(p.until[j]) {
			return j, true
		}
	}
	return i, false
}

func rotates(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusTooManyRequests
}

// keyPools hands out one keyPool per distinct key list, so the state of a
// list survives between turns and is reset when config.json changes it.
type keyPools struct {
	mu    sync.Mutex
	pools map[string]*keyPool
}

func (k *keyPools) get(keys []string) *keyPool {
	id := strings.Join(keys, "\x00")
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.pools[id]; ok {
		return p
	}
	if k.pools == nil || len(k.pools) >= maxKeyPools {
		// Old lists are gone from config.json; their state is worthless.
		k.pools = map[string]*keyPool{}
	}
	p := newKeyPool(append([]string(nil), keys...))
	k.pools[id] = p
	return p
}

// apiKeyKey carries a request's API key to the transport.
type apiKeyKey struct{}

func withAPIKey(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, apiKeyKey{}, key)
}

// authorize sets the Authorization header from the request context's key,
// replacing the client's default key.
func authorize(req *http.Request) *http.Request {
	key, ok := req.Context().Value(apiKeyKey{}).(string)
	if !ok {
		return req
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}

// redact cuts every secret out of s.
func redact(s string, secrets []string) string {
	for _, k := range secrets {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}
