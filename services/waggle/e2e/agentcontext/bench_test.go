package agentcontext

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// BenchmarkTurnContext times what an agent turn waits for before its
// model is called, against a real store (embedded NATS, JSONL files) with
// a workspace of 10 sessions of 10 turns and 40 frames: "separate" is the
// 12 concurrent requests the runner made before LoadTurnContext (history,
// workspace, profile, frames, Workspace Now, identity ×2, awareness ×2,
// key knowledge, recall ×2), "one" is LoadTurnContext. Reported: p50 and
// p99 of the wall time per load.
func BenchmarkTurnContext(b *testing.B) {
	srv, _ := start(b, waggletest.WithConfig(func(c *app.Config) { c.NATSListen = waggletest.FreeAddr(b) }))
	nc := srv.DialNATS()
	for i := range 10 {
		for j := range 10 {
			srv.Chat(obj{"message": fmt.Sprintf("We need to plan launch task %d of thread %d", j, i), "workspace": ws, "session": fmt.Sprint("s", i)}).All(b)
		}
	}
	for i := range 40 {
		waggletest.Operate(b, nc, protocol.AddFrame, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws},
			Content: fmt.Sprintf("Decision %d: the launch uses plan %d", i, i), Importance: protocol.ImportanceImportant})
	}
	ref := protocol.SessionRef{Workspace: ws, Session: "s0"}
	const query = "how should we price the launch"
	b.Run("separate", func(b *testing.B) { timeLoads(b, func() error { return loadSeparately(nc, ref, query) }) })
	b.Run("one", func(b *testing.B) {
		timeLoads(b, func() error {
			_, err := bus.Call(context.Background(), nc, protocol.LoadTurnContext, protocol.TurnContextRequest{SessionRef: ref, Preload: true, Knowledge: 12,
				Recall: &protocol.TurnRecallRequest{Query: query}}, bus.Within(10*time.Second))
			return err
		})
	})
}

func timeLoads(b *testing.B, load func() error) {
	var times []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := load(); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}

// loadSeparately is the runner's context load before LoadTurnContext.
func loadSeparately(nc *nats.Conn, ref protocol.SessionRef, query string) error {
	ctx := context.Background()
	within := bus.Within(10 * time.Second)
	owner := protocol.MemoryOwner{Workspace: ref.Workspace}
	var (
		wg   sync.WaitGroup
		errs [12]error
	)
	call := func(i int, f func() error) { wg.Go(func() { errs[i] = f() }) }
	call(0, func() error {
		_, err := bus.Call(ctx, nc, protocol.ReadHistory, protocol.HistoryRequest{SessionRef: ref, Tools: true}, within)
		return err
	})
	call(1, func() error {
		_, err := bus.Call(ctx, nc, protocol.GetWorkspace, protocol.WorkspaceRequest{Workspace: ref.Workspace}, within)
		return err
	})
	call(2, func() error {
		_, err := bus.Call(ctx, nc, protocol.GetProfile, protocol.ProfileRequest{}, within)
		return err
	})
	call(3, func() error {
		_, err := bus.Call(ctx, nc, protocol.ListFrames, protocol.MemoryFramesRequest{MemoryOwner: owner, Limit: 200}, within)
		return err
	})
	call(4, func() error {
		_, err := bus.Call(ctx, nc, protocol.GetWorkspaceNow, protocol.WorkspaceNowRequest{Workspace: ref.Workspace, ExceptSession: ref.Session}, within)
		return err
	})
	for i, m := range []protocol.MindRef{{Workspace: ref.Workspace}, {}} {
		call(5+i, func() error { _, err := bus.Call(ctx, nc, protocol.GetIdentity, m, within); return err })
		call(7+i, func() error { _, err := bus.Call(ctx, nc, protocol.GetAwareness, m, within); return err })
	}
	call(9, func() error {
		_, err := bus.Call(ctx, nc, protocol.GetKnowledgeGraph, protocol.KnowledgeGraphRequest{MemoryOwner: owner, Limit: 12}, within)
		return err
	})
	for i, scope := range []string{protocol.MindPersonal, protocol.MindWorkspace} {
		call(10+i, func() error {
			_, err := bus.Call(ctx, nc, protocol.QueryMemory, protocol.MemoryQueryRequest{MemoryOwner: owner, Query: query, Scope: scope, Limit: 10}, within)
			return err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
