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
