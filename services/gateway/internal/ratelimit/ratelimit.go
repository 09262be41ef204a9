// Package ratelimit limits requests per client and route over a sliding
// window shared by every gateway replica (a JetStream KV bucket): per user
// in team-server mode (teamauth applies it after authenticating), per
// client IP in local mode (Middleware).
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/routematch"
)

// DefaultRouteLimits are the original's per-route overrides (reference
// §0.2) that exist in this server.
var DefaultRouteLimits = map[string]int{"/api/chat": 120}

// Config configures rate limiting.
type Config struct {
	// Limit is the number of requests one client may make to one route
	// (method and route pattern) per Window. Default 100; negative turns
	// rate limiting off.
	Limit int
	// RouteLimits overrides Limit per route pattern. Default
	// DefaultRouteLimits.
	RouteLimits map[string]int
	// Window is the sliding window. Default 60s.
	Window time.Duration
	// Replicas is the replica count of the shared KV bucket. Default 1.
	Replicas int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.Limit == 0 {
		c.Limit = 100
	}
	if c.RouteLimits == nil {
		c.RouteLimits = DefaultRouteLimits
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.Window < time.Second {
		return errors.New("ratelimit: window must be at least 1s")
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Limiter is a sliding-window rate limiter whose windows live in a
// JetStream KV bucket, so every gateway replica counts the same requests.
// Each key holds the times of the requests in its current window; a
// request is one compare-and-set, retried on conflict.
type Limiter struct {
	cfg Config
	nc  *nats.Conn
	log *slog.Logger

	mu sync.Mutex
	kv jetstream.KeyValue
}

// NewLimiter returns a limiter on nc; the bucket is created on first use.
func NewLimiter(nc *nats.Conn, cfg Config, log *slog.Logger) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Limiter{cfg: cfg, nc: nc, log: log}, nil
}

// Enabled reports whether the limiter limits anything.
func (l *Limiter) Enabled() bool { return l.cfg.Limit > 0 }

func (l *Limiter) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv != nil {
		return l.kv, nil
	}
	js, err := jetstream.New(l.nc)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: jetstream: %w", err)
	}
	kv, err := bus.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      protocol.BucketRateLimits,
		Description: "Waggle rate-limit windows (per user and route)",
		History:     1,
		// A key idle for two windows holds nothing that still counts.
		TTL:      2 * l.cfg.Window,
		Storage:  jetstream.MemoryStorage,
		Replicas: l.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("ratelimit: bucket: %w", err)
	}
	l.kv = kv
	return kv, nil
}

// forget drops the cached bucket after a failure, so the next request
// looks it up (or creates it) again: the bucket is in memory, and a NATS
// server that restarted no longer has it.
func (l *Limiter) forget(kv jetstream.KeyValue) {
	l.mu.Lock()
	if l.kv == kv {
		l.kv = nil
	}
	l.mu.Unlock()
}

// Decision is the outcome of one rate-limit check.
type Decision struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter time.Duration
}

// limitFor is the limit of a route pattern.
func (l *Limiter) limitFor(pattern string) int {
	if n, ok := l.cfg.RouteLimits[pattern]; ok {
		return n
	}
	return l.cfg.Limit
}

// maxCASAttempts bounds retries when concurrent requests of one key race.
const maxCASAttempts = 20

// Take counts one request of client on method+pattern, unless the window
// is full.
func (l *Limiter) Take(ctx context.Context, client, method, pattern string) (Decision, error) {
	limit := l.limitFor(pattern)
	d := Decision{Allowed: true, Limit: limit, Remaining: limit}
	if limit <= 0 {
		return d, nil
	}
	kv, err := l.bucket(ctx)
	if err != nil {
		return d, err
	}
	sum := sha256.Sum256([]byte(client + "\x00" + method + "\x00" + pattern))
	key := hex.EncodeToString(sum[:16])
	for range maxCASAttempts {
		var times []int64
		var rev uint64
		entry, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			l.forget(kv)
			return d, fmt.Errorf("ratelimit: read: %w", err)
		default:
			rev = entry.Revision()
			times = decodeTimes(entry.Value())
		}
		now := l.cfg.Now()
		cutoff := now.Add(-l.cfg.Window).UnixMilli()
		live := times[:0]
		for _, t := range times {
			if t > cutoff {
				live = append(live, t)
			}
		}
		if len(live) >= limit {
			// Full: the oldest request in the window must age out first.
			oldest := live[len(live)-limit]
			return Decision{Limit: limit, RetryAfter: time.Duration(oldest-cutoff) * time.Millisecond}, nil
		}
		live = append(live, now.UnixMilli())
		if rev == 0 {
			_, err = kv.Create(ctx, key, encodeTimes(live))
		} else {
			_, err = kv.Update(ctx, key, encodeTimes(live), rev)
		}
		if err == nil {
			return Decision{Allowed: true, Limit: limit, Remaining: limit - len(live)}, nil
		}
		if !isConflict(err) {
			l.forget(kv)
			return d, fmt.Errorf("ratelimit: write: %w", err)
		}
	}
	return d, errors.New("ratelimit: write: too much contention")
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}

func encodeTimes(ts []int64) []byte {
	b := make([]byte, 8*len(ts))
	for i, t := range ts {
		binary.BigEndian.PutUint64(b[8*i:], uint64(t))
	}
	return b
}

func decodeTimes(b []byte) []int64 {
	ts := make([]int64, 0, len(b)/8)
	for i := 0; i+8 <= len(b); i += 8 {
		ts = append(ts, int64(binary.BigEndian.Uint64(b[i:])))
	}
	return ts
}

// Apply checks the limit and writes the headers; it answers 429 and
// returns false when the request must stop. A broken bucket lets the
// request through: losing rate limiting for a moment beats losing the
// service.
func (l *Limiter) Apply(w http.ResponseWriter, r *http.Request, client, pattern string) bool {
	d, err := l.Take(r.Context(), client, r.Method, pattern)
	if err != nil {
		l.log.Warn("ratelimit: unavailable; request let through", "err", err)
		return true
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	if d.Allowed {
		return true
	}
	ms := d.RetryAfter.Milliseconds()
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(float64(ms)/1000)), 10))
	respond.JSON(w, respond.Status(protocol.RateLimited), struct {
		Error        string `json:"error"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	}{"Too Many Requests", ms})
	return false
}

// Middleware limits every request by client IP and route pattern: for
// local mode, where it is off unless configured. It panics when cfg does
// not Validate.
func Middleware(d forward.Deps, cfg Config) func(http.Handler) http.Handler {
	l, err := NewLimiter(d.NC, cfg, d.Log)
	if err != nil {
		panic(err)
	}
	return func(next http.Handler) http.Handler {
		if !l.Enabled() {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodOptions || r.URL.Path == "/health" {
				next.ServeHTTP(w, r)
				return
			}
			pattern, _ := routematch.Match(r)
			if !l.Apply(w, r, "ip:"+clientIP(r), pattern) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
