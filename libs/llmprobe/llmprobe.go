// Package llmprobe answers "is the model server up, and which models does
// it serve?" cheaply: one `GET {base}/models` with a short timeout, cached
// briefly and shared by concurrent callers, so no turn ever waits on a
// multi-second probe.
package llmprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a Prober.
type Config struct {
	// URL is the OpenAI-compatible base URL including /v1. Required.
	URL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// KeyFunc, when set and APIKey is empty, gives the bearer token of
	// each probe (a key saved in the vault after the start).
	KeyFunc func() string
	// Timeout bounds one probe. Default 1s.
	Timeout time.Duration
	// TTL is how long a result is reused. Default 5s.
	TTL time.Duration
	// Client is the HTTP client. Default: a client with Timeout.
	Client *http.Client
	// OnChange, when set, is called (outside the prober's lock, on the
	// probing goroutine) after a probe whose outcome differs from the
	// previous one: reachability, detail or the model list. The first
	// probe always counts as a change.
	OnChange func(Status)
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("llmprobe: URL is required")
	}
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return fmt.Errorf("llmprobe: URL %q must start with http:// or https://", c.URL)
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 5 * time.Second
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout}
	}
	return nil
}

// Status is the last probe's outcome.
type Status struct {
	Reachable bool      `json:"reachable"`
	CheckedAt time.Time `json:"checkedAt"`
	Detail    string    `json:"detail,omitempty"`
	// Code is the HTTP status of an answer that was not 2xx (0 when the
	// server answered 2xx or not at all).
	Code int `json:"code,omitempty"`
	// Models are the ids the server listed, in its order; empty when it
	// did not answer or its list was not the OpenAI shape.
	Models []string `json:"models,omitempty"`
}

// Lists reports whether the server listed model. A server that listed
// nothing (or an unreadable list) is given the benefit of the doubt.
func (s Status) Lists(model string) bool {
	return len(s.Models) == 0 || slices.Contains(s.Models, model)
}

// WantsKey reports whether the server answered but refused the probe's
// key (or its lack of one): a turn with a key of its own (a team's
// vault) may still be served.
func (s Status) WantsKey() bool {
	return s.Code == http.StatusUnauthorized || s.Code == http.StatusForbidden
}

func (s Status) sameOutcome(o Status) bool {
	return s.Reachable == o.Reachable && s.Detail == o.Detail && slices.Equal(s.Models, o.Models)
}

// Prober probes one model server.
type Prober struct {
	cfg Config

	mu       sync.Mutex
	last     Status
	inflight chan struct{} // closed when the running probe finishes
}

// New returns a Prober; cfg must have passed Validate.
func New(cfg Config) *Prober { return &Prober{cfg: cfg} }

// Available reports whether the model server answered 2xx recently,
// probing if the cached answer is older than TTL.
func (p *Prober) Available(ctx context.Context) bool { return p.Check(ctx).Reachable }

// Check returns a fresh-enough Status.
func (p *Prober) Check(ctx context.Context) Status {
	p.mu.Lock()
	if !p.last.CheckedAt.IsZero() && time.Since(p.last.CheckedAt) < p.cfg.TTL {
		st := p.last
		p.mu.Unlock()
		return st
	}
	wait := p.inflight
	if wait == nil {
		wait = make(chan struct{})
		p.inflight = wait
		p.mu.Unlock()
		// The result is cached for everyone: a caller that gives up (a
		// cancelled turn) must not leave "unreachable" behind for the
		// next TTL, so the probe runs to its own timeout.
		st := p.probe(context.WithoutCancel(ctx))
		p.mu.Lock()
		if st.Detail == detailSlow && p.last.Reachable {
			// A server that answered before and is only slow now (a loaded
			// machine) is still there: its turns wait for it and fail, if it
			// really hangs, with the model's own timeout — never silently
			// in echo mode. A refused connection or an error answer is seen
			// at once.
			st = p.last
			st.CheckedAt = time.Now()
		}
		changed := p.last.CheckedAt.IsZero() || !st.sameOutcome(p.last)
		p.last, p.inflight = st, nil
		p.mu.Unlock()
		close(wait)
		if changed && p.cfg.OnChange != nil {
			p.cfg.OnChange(st)
		}
		return st
	}
	p.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return Status{Detail: "probe cancelled"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Forget drops the cached result, so the next Check probes again (the
// key changed: a server that refused the old one may take the new one).
func (p *Prober) Forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight == nil {
		p.last.CheckedAt = time.Time{}
	}
}

// Last returns the cached Status without probing.
func (p *Prober) Last() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *Prober) probe(ctx context.Context) Status {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	now := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.cfg.URL, "/")+"/models", nil)
	if err != nil {
		return Status{CheckedAt: now, Detail: "bad URL"}
	}
	key := p.cfg.APIKey
	if key == "" && p.cfg.KeyFunc != nil {
		key = p.cfg.KeyFunc()
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return Status{CheckedAt: now, Detail: detailSlow}
		}
		return Status{CheckedAt: now, Detail: "unreachable"}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Status{CheckedAt: now, Detail: fmt.Sprintf("HTTP %d", resp.StatusCode), Code: resp.StatusCode}
	}
	return Status{Reachable: true, CheckedAt: now, Models: modelIDs(resp.Body)}
}

// detailSlow is the Detail of a probe that got no answer within Timeout.
const detailSlow = "no answer in time"

// maxListBytes bounds the model list read: a server listing thousands of
// models (OpenRouter) stays well under it.
const maxListBytes = 4 << 20

// modelIDs reads an OpenAI-shaped list ({"data":[{"id":…},…]}); anything
// else is no list.
func modelIDs(body io.Reader) []string {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(body, maxListBytes)).Decode(&list) != nil {
		return nil
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
