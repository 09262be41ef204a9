package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
)

// TestFreshClusterStart: the three nodes and every process — the services
// process, both runners, both gateways — are started at the same moment,
// as an orchestrator starts a team server: no process waits for the
// cluster to form. Every process starts (it waits for the nodes to listen
// and for the cluster's first JetStream leader, retrying what it could not
// create yet), every stream and bucket is on all three nodes
// (--nats-replicas 3), and a chat works on both gateways.
func TestFreshClusterStart(t *testing.T) {
	began := time.Now()
	h := bootHarness(t, allAtOnce)
	t.Logf("every process healthy %s after the nodes were started", time.Since(began).Round(time.Millisecond))
	h.setScript(func(r *llmtest.Request) llmtest.Response { return llmtest.Reply("re: " + lastUser(r)) })

	js := h.dial()
	names := h.streams(js)
	if len(names) == 0 {
		t.Fatal("no stream on the cluster")
	}
	for _, name := range names {
		h.waitCurrent(js, name) // a leader and two current replicas
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := js.Stream(ctx, name)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != nodes {
			t.Errorf("%s has %d replicas, want %d", name, r, nodes)
		}
	}
	for gw := range h.gateways {
		msg := fmt.Sprintf("hello gateway %d", gw)
		evs, err := collect(h.chat(gw, map[string]any{"message": msg, "session": fmt.Sprintf("fresh-%d", gw)}), time.Minute, nil)
		if err != nil {
			t.Fatalf("chat on gateway %d: %v", gw, err)
		}
		if c := doneContent(t, events(evs)); c != "re: "+msg {
			t.Errorf("chat on gateway %d answered %q", gw, c)
		}
	}
	for i, r := range h.runners {
		out := r.Output()
		if !strings.Contains(out, `msg="module started" module=turn-runner`) {
			t.Errorf("runner-%d did not say it started", i)
		}
		// What it waited for, for the reader of the test's log.
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "waiting for") || strings.Contains(line, "the cluster answered") || strings.Contains(line, `msg="module started"`) {
				t.Logf("runner-%d: %s", i, line)
			}
		}
	}
}
