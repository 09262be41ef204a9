package llmprobe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestProbeCachesAndShares(t *testing.T) {
	var hits atomic.Int32
	status := atomic.Int32{}
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			t.Errorf("path = %s", r.URL.Path)
		}
		if r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("auth = %q", r.Header.Get("Authorization"))
		}
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	cfg := Config{URL: srv.URL + "/v1", APIKey: "k", TTL: time.Hour}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New(cfg)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !p.Available(context.Background()) {
				t.Error("not available")
			}
		}()
	}
	wg.Wait()
	if hits.Load() != 1 {
		t.Fatalf("probes = %d, want 1 shared probe", hits.Load())
	}
}

func TestProbeUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	cfg := Config{URL: srv.URL + "/v1", TTL: time.Nanosecond}
	_ = cfg.Validate()
	p := New(cfg)
	if st := p.Check(context.Background()); st.Reachable || st.Detail != "HTTP 503" {
		t.Fatalf("status = %+v", st)
	}
	srv.Close()
	if st := p.Check(context.Background()); st.Reachable || st.Detail != "unreachable" {
		t.Fatalf("status after close = %+v", st)
	}
}

// A caller that gives up while it probes (a cancelled turn) does not leave
// "unreachable" cached for the turns after it.
func TestCancelledCallerDoesNotCacheAFailure(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	}))
	defer srv.Close()
	cfg := Config{URL: srv.URL + "/v1", TTL: time.Hour, Timeout: 10 * time.Second}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Status, 1)
	go func() { done <- p.Check(ctx) }()
	<-arrived
	cancel()
	close(release)
	if st := <-done; !st.Reachable {
		t.Fatalf("the probe of a cancelled caller: %+v, want the model server's answer", st)
	}
	if !p.Available(context.Background()) {
		t.Fatalf("after a cancelled caller: %+v", p.Last())
	}
}

// TestProbeListsModelsAndReportsChanges: the probe keeps the ids an
// OpenAI-shaped list names (Ollama's /v1/models answers this way) and
// calls OnChange once per different outcome, not per probe.
func TestProbeListsModelsAndReportsChanges(t *testing.T) {
	var body atomic.Value
	body.Store(`{"object":"list","data":[{"id":"llama3.2:1b","object":"model"},{"id":"qwen2.5"}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	var changes []Status
	cfg := Config{URL: srv.URL + "/v1", TTL: time.Nanosecond, OnChange: func(s Status) { changes = append(changes, s) }}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New(cfg)
	st := p.Check(context.Background())
	if !st.Reachable || len(st.Models) != 2 || st.Models[0] != "llama3.2:1b" || st.Models[1] != "qwen2.5" {
		t.Fatalf("status = %+v", st)
	}
	if !st.Lists("qwen2.5") || st.Lists("claude-sonnet-4-6") {
		t.Fatalf("Lists wrong for %v", st.Models)
	}
	p.Check(context.Background())
	body.Store(`not json`)
	st = p.Check(context.Background())
	if !st.Reachable || len(st.Models) != 0 || !st.Lists("anything") {
		t.Fatalf("an unreadable list must leave the server reachable and judge no model: %+v", st)
	}
	if len(changes) != 2 {
		t.Fatalf("OnChange called %d times, want 2 (first probe, list gone): %+v", len(changes), changes)
	}
}

// TestSlowAnswerKeepsAReachableServer: a server that answered once and
// then answers a probe too slowly (a loaded machine) stays reachable —
// its turns are not silently answered in echo mode — while one that
// refuses connections is unreachable at once, and a slow server never
// seen answering is not reachable.
func TestSlowAnswerKeepsAReachableServer(t *testing.T) {
	var slow atomic.Bool
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	defer close(release)
	cfg := Config{URL: srv.URL + "/v1", TTL: time.Nanosecond, Timeout: 50 * time.Millisecond}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New(cfg)
	if !p.Available(context.Background()) {
		t.Fatal("not available at first")
	}
	slow.Store(true)
	if st := p.Check(context.Background()); !st.Reachable {
		t.Fatalf("a slow answer from a server that answered before: %+v", st)
	}

	fresh := New(cfg)
	if st := fresh.Check(context.Background()); st.Reachable {
		t.Fatalf("a server never seen answering, too slow: %+v", st)
	}

	srv.CloseClientConnections()
	srv.Listener.Close()
	if st := p.Check(context.Background()); st.Reachable {
		t.Fatalf("a server that refuses connections: %+v", st)
	}
}
