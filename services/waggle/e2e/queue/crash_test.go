package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestDesktopQueueSurvivesKill9AndLostWrites is the recovery rule of the
// desktop, where NATS runs inside `waggle serve` and the turn leases and
// session queues are written without an fsync: a turn streaming and three
// turns queued behind it, the process killed with SIGKILL, and — what a
// kill can cost NATS's asynchronous streams, its last flush window — the
// last two queued turns' leases and joins removed from NATS's store before
// the restart. After the restart, a turn sent at once queues behind all
// four, and the session's history holds every turn, each once, in the
// order the server accepted them: the session store's record of accepted
// turns put back what NATS lost.
func TestDesktopQueueSurvivesKill9AndLostWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process tests are skipped in -short mode")
	}
	const session = "crash"
	dir, addr := t.TempDir(), waggletest.FreeAddr(t)
	start := func(name string) *waggletest.Proc {
		return waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir), waggletest.ProcAddr(addr), waggletest.ProcName(name),
			waggletest.ProcKillAtCleanup(), waggletest.ProcArgs("--echo-delay", "40ms", "--log-format", "text"))
	}
	p := start("waggle serve (before the kill)")
	msgs := []string{"crash m0", "crash m1", "crash m2", "crash m3"}
	held := chat(t, p.URL, session, msgs[0])
	defer held.Close()
	held.Until(t, "token")
	for _, m := range msgs[1:] {
		st := chat(t, p.URL, session, m)
		untilStep(t, st, protocol.StepWaitingForSession)
		st.Close()
	}
	p.Kill()
	<-p.Exited()

	ids := loseLastWrites(t, filepath.Join(dir, "nats"), session, msgs[2:])

	p = start("waggle serve (after the restart)")
	late := chat(t, p.URL, session, "crash late")
	defer late.Close()
	msgs = append(msgs, "crash late")

	var h []histLine
	waitfor.Within(2*time.Minute).Every(100*time.Millisecond).NoError(t, "every turn answered", func() error {
		h = history(t, p.URL, session)
		if len(h) < 2*len(msgs) {
			return fmt.Errorf("%d of %d messages", len(h), 2*len(msgs))
		}
		return nil
	})
	var got, want []string
	for _, m := range msgs {
		want = append(want, "user:"+m, "assistant:"+protocol.EchoText(m))
	}
	for _, l := range h {
		got = append(got, l.Role+":"+l.Content)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history after the restart:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(p.Output(), "put back turns NATS lost") {
		t.Fatalf("the restarted runner did not put back the lost leases and places of %v:\n%s", ids, p.Output())
	}
}

// loseLastWrites opens the NATS store of a killed `waggle serve` and
// removes the leases and queue joins of the turns whose messages are msgs:
// what a crash loses when those writes were in NATS's last flush window.
// It returns their turn ids.
func loseLastWrites(t *testing.T, storeDir, session string, msgs []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := embednats.New(embednats.Config{StoreDir: storeDir, ServerName: "inspector"})
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop(context.Background()) }()
	nc, err := nats.Connect("", srv.ConnectOption())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, ownership.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var l ownership.Lease
		if err := json.Unmarshal(e.Value(), &l); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(msgs, l.Request.Message) {
			ids = append(ids, k)
			if err := kv.Purge(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ids) != len(msgs) {
		t.Fatalf("leases of %v: found %v", msgs, ids)
	}
	qs, err := js.Stream(ctx, sessionqueue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := qs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := qs.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted or purged
		}
		var r struct{ Op, Turn string }
		if json.Unmarshal(m.Data, &r) == nil && r.Op == "join" && slices.Contains(ids, r.Turn) {
			if err := qs.DeleteMsg(ctx, seq); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	if removed != len(ids) {
		t.Fatalf("removed %d joins of %v", removed, ids)
	}
	return ids
}

// chat starts a chat turn in session and checks it was accepted.
func chat(t *testing.T, url, session, message string) *waggletest.Stream {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"message": message, "session": session})
	resp, err := http.Post(url+"/api/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("chat %q: status %d", message, resp.StatusCode)
	}
	return waggletest.NewStream(resp)
}

// untilStep reads st until the step event whose content is step.
func untilStep(t *testing.T, st *waggletest.Stream, step string) {
	t.Helper()
	for {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before the step %q: %v", step, err)
		}
		if ev.Name == "step" && ev.Content() == step {
			return
		}
	}
}

type histLine struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func history(t *testing.T, url, session string) []histLine {
	t.Helper()
	resp, err := http.Get(url + "/api/history?workspace=default&session=" + session)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Messages []histLine }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil {
		t.Fatalf("history: status %d", resp.StatusCode)
	}
	return h.Messages
}
