package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
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
		waitfor.Within(60*time.Second).Every(200*time.Millisecond).NoError(t, name+" on three nodes", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := js.Stream(ctx, name)
			if err != nil {
				return err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return err
			}
			if info.Config.Replicas != nodes {
				t.Fatalf("%s has %d replicas, want %d", name, info.Config.Replicas, nodes)
			}
			if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != nodes-1 {
				return fmt.Errorf("not placed on all nodes yet: %+v", info.Cluster)
			}
			return nil
		})
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
