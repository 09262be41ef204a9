package distributed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// natsProc is a standalone NATS server (`waggle nats`) the test stops and
// starts again on the same address and store.
type natsProc struct {
	c     *cluster
	addr  string
	store string
	proc  *waggletest.NATSProc
}

// startNATS runs `waggle nats` on addr and waits until JetStream answers.
func (c *cluster) startNATS(addr string) *natsProc {
	c.t.Helper()
	n := &natsProc{c: c, addr: addr, store: filepath.Join(c.dir, "nats")}
	n.proc = waggletest.NewNATSProc(c.t, waggleBin, "nats", filepath.Join(c.dir, "nats.log"),
		"--listen", n.addr, "--store-dir", n.store, "--name", "waggle-nats")
	n.start()
	return n
}

// start (re)starts the server, appending to its log.
func (n *natsProc) start() {
	t := n.c.t
	t.Helper()
	n.proc.Start()
	// On a timeout startNATS's cleanup logs the server's log.
	waitfor.Within(20*time.Second).Every(50*time.Millisecond).True(t, "nats ready", func() bool {
		if n.ready() {
			return true
		}
		if !n.proc.Alive() {
			err := n.proc.Wait()
			b, _ := os.ReadFile(n.proc.Log)
			t.Fatalf("nats exited before it was ready (%v):\n%s", err, b)
		}
		return false
	})
}

// ready reports whether the server accepts a client and JetStream answers.
func (n *natsProc) ready() bool {
	auth, err := embednats.ClientOption(n.nkey())
	if err != nil {
		return false // not made yet
	}
	nc, err := nats.Connect("nats://"+n.addr, auth, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err == nil
}

// nkey is the credentials file `waggle nats` makes in its store dir.
func (n *natsProc) nkey() string { return filepath.Join(n.store, embednats.CredentialsFileName) }

// stop shuts the server down (SIGTERM, as a service manager's restart does).
func (n *natsProc) stop() {
	n.c.t.Helper()
	n.proc.Signal(syscall.SIGTERM)
	select {
	case <-n.proc.Exited():
	case <-time.After(20 * time.Second):
		n.c.t.Fatal("nats did not stop within 20s of SIGTERM")
	}
}

// TestNATSRestart: the NATS server of a distributed Waggle is stopped for
// 5 s and started again. Every process reconnects by itself; a turn that
// was streaming and one waiting for an approval both end (done, or a clean
// error event) rather than hang; a new chat works within 10 s of NATS
// being back; no session line, pending approval or grant is lost.
func TestNATSRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{externalNATS: true})
	hold, holdDown := c.pause(), c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		switch msg := lastUser(r); {
		case msg == "held":
			return heldReply(hold)
		case msg == "streams while down":
			return heldReply(holdDown)
		case strings.HasPrefix(msg, "write "):
			if toolResults(r) == 0 {
				file := strings.TrimPrefix(msg, "write ")
				return llmtest.Response{Steps: llmtest.ToolCall(0, "call_"+file, "write_file", fmt.Sprintf(`{"path":%q,"content":"yes"}`, file), 1)}
			}
			return llmtest.Reply("written")
		default:
			return llmtest.Reply("re: " + msg)
		}
	})

	// Before the outage: a finished turn and an "always" grant.
	if evs := c.chat(0, map[string]any{"message": "before", "session": "keep"}).All(t); last(evs).Name != "done" {
		t.Fatalf("turn before the outage: %v", waggletest.Names(evs))
	}
	st := c.chat(1, map[string]any{"message": "write granted.txt", "session": "grant"})
	c.approve(t, 1, readApproval(t, st), true)
	if rest := allWithin(t, st, 15*time.Second); last(rest).Name != "done" {
		t.Fatalf("granted turn: %v", waggletest.Names(rest))
	}
	grantsBefore := c.grants(t)
	if len(grantsBefore) != 1 {
		t.Fatalf("grants before the outage: %v", grantsBefore)
	}

	// In flight when NATS goes: a turn waiting for its approval and one
	// streaming its reply.
	pending := c.chat(0, map[string]any{"message": "write pending.txt", "session": "pending"})
	pendingID := readApproval(t, pending)
	held := c.chat(1, map[string]any{"message": "held", "session": "held"})
	readUntil(t, held, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	heldDown := c.chat(0, map[string]any{"message": "streams while down", "session": "held-down"})
	readUntil(t, heldDown, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })

	c.nats.stop()
	down := time.Now()
	// /health tells the load balancer while NATS is away.
	c.waitHealth(t, 0, http.StatusServiceUnavailable, 10*time.Second)
	// A chat during the outage is refused cleanly, before any stream.
	resp := c.do(0, http.MethodPost, "/api/chat", map[string]any{"message": "during", "session": "during"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("chat during the outage: %d %s", resp.StatusCode, body)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("chat during the outage: %d %s, want 503", resp.StatusCode, body)
	}
	// One turn's model goes on streaming while the bus is away: its
	// runner cannot publish.
	holdDown.Release()
	// The outage itself is the scenario: NATS stays down for 5 s.
	time.Sleep(time.Until(down.Add(5 * time.Second)))
	c.nats.start()
	back := time.Now()

	// A new chat works within 10 s of NATS being back, on both gateways.
	for gw := range c.gateways {
		c.waitChat(t, gw, back, 10*time.Second)
	}
	t.Logf("new chats answered %s after NATS was back", time.Since(back).Round(100*time.Millisecond))

	// The turn that was waiting on its model through the outage finishes.
	hold.Release()
	evs := allWithin(t, held, 30*time.Second)
	t.Logf("turn waiting on its model across the outage: %v", waggletest.Names(evs))
	if last(evs).Name != "done" || waggletest.Text(evs) != "second half" {
		t.Errorf("turn waiting on its model across the outage: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	// The turn that streamed into the outage ends: done, a clean error,
	// or — its events published before the restart are gone with the
	// memory stream — stream_gap ("Part of this reply was not kept…"),
	// each with a message for the user.
	evs = readAll(t, heldDown, 30*time.Second)
	t.Logf("turn streaming during the outage: %v %s", waggletest.Names(evs), last(evs).Data)
	switch l := last(evs); l.Name {
	case "done":
	case "error", "stream_gap":
		var e struct{ Message string }
		l.Decode(t, &e)
		if e.Message == "" {
			t.Errorf("turn streaming during the outage: %s without a message: %s", l.Name, l.Data)
		}
	default:
		t.Errorf("turn streaming during the outage ended with %v", waggletest.Names(evs))
	}

	// The pending approval survived and can still be answered, within
	// 10 s of NATS being back like a chat (until the approval service's
	// connection is back the answer is a 503 a client retries).
	waitfor.Within(time.Until(back.Add(10*time.Second))).Every(100*time.Millisecond).NoError(t, "approval answered after the outage", func() error {
		var out map[string]any
		switch code := c.json(1, http.MethodPost, "/api/approval/"+pendingID, map[string]any{"approved": true, "always": false}, &out); code {
		case http.StatusOK:
			return nil
		case http.StatusServiceUnavailable:
			return fmt.Errorf("503 %v", out)
		default:
			t.Fatalf("approve %s after the outage: %d %v", pendingID, code, out)
			return nil
		}
	})
	rest := allWithin(t, pending, 30*time.Second)
	t.Logf("approval turn across the outage: %v", waggletest.Names(rest))
	if last(rest).Name != "done" || waggletest.Text(rest) != "written" {
		t.Errorf("approval turn after the outage: %v %q", waggletest.Names(rest), waggletest.Text(rest))
	} else if b, err := os.ReadFile(filepath.Join(c.dir, "data", "workspaces", "default", "files", "pending.txt")); err != nil || string(b) != "yes" {
		t.Errorf("pending.txt: %q %v", b, err)
	}

	// Nothing written before the outage is gone.
	if h := c.history("keep"); len(h) != 2 || h[0].Content != "before" || h[1].Content != "re: before" {
		t.Errorf("history of the turn before the outage: %+v", h)
	}
	if h := c.history("grant"); len(h) != 2 || h[1].Content != "written" {
		t.Errorf("history of the granted turn: %+v", h)
	}
	if h := c.history("held"); len(h) != 2 || h[0].Content != "held" || h[1].Content != "first half second half" {
		t.Errorf("history of the turn waiting on its model: %+v", h)
	}
	if h := c.history("held-down"); len(h) < 1 || h[0].Content != "streams while down" {
		t.Errorf("history of the turn streaming during the outage: %+v", h)
	} else {
		t.Logf("history of the turn streaming during the outage: %+v", h)
	}
	// Its session is free again (the gateway that ended the turn removed
	// its lease, which frees the session lock).
	if evs := c.chat(1, map[string]any{"message": "again", "session": "held-down"}).All(t); last(evs).Name != "done" || waggletest.Text(evs) != "re: again" {
		t.Errorf("next turn in the session whose turn streamed during the outage: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	if g := c.grants(t); len(g) != 1 || g[0]["id"] != grantsBefore[0]["id"] {
		t.Errorf("grants after the outage: %v, before: %v", g, grantsBefore)
	}
	for _, p := range append(append([]*waggletest.Proc{c.services}, c.runners...), c.gateways...) {
		if !p.Alive() {
			t.Errorf("%s exited during the outage: %v", p.Name, p.Err())
		}
	}
}

// readApproval reads a stream up to its approval_required event and returns
// the request id.
func readApproval(t *testing.T, st *waggletest.Stream) string {
	t.Helper()
	evs := readUntil(t, st, "approval_required", named("approval_required"))
	var a struct{ RequestID string }
	last(evs).Decode(t, &a)
	if a.RequestID == "" {
		t.Fatalf("approval_required without a request id: %s", last(evs).Data)
	}
	return a.RequestID
}

// approve answers an approval on gateway gw.
func (c *cluster) approve(t *testing.T, gw int, id string, always bool) {
	t.Helper()
	var out map[string]any
	if code := c.json(gw, http.MethodPost, "/api/approval/"+id, map[string]any{"approved": true, "always": always}, &out); code != http.StatusOK {
		t.Fatalf("approve %s: %d %v", id, code, out)
	}
}

// grants lists the saved grants.
func (c *cluster) grants(t *testing.T) []map[string]any {
	t.Helper()
	var out struct{ Grants []map[string]any }
	if code := c.json(0, http.MethodGet, "/api/approval/grants", nil, &out); code != http.StatusOK {
		t.Fatalf("grants: %d", code)
	}
	return out.Grants
}

// waitHealth polls a gateway's /health until it answers status.
func (c *cluster) waitHealth(t *testing.T, gw, status int, within time.Duration) {
	t.Helper()
	waitfor.Within(within).Every(100*time.Millisecond).NoError(t, fmt.Sprintf("gateway %d /health answering %d", gw, status), func() error {
		resp, err := http.Get(c.gateways[gw].URL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// waitChat retries a chat on gateway gw until one streams to done, failing
// when none did within d of since.
func (c *cluster) waitChat(t *testing.T, gw int, since time.Time, d time.Duration) {
	t.Helper()
	var tried []string
	i := 0
	waitfor.Within(time.Until(since.Add(d))).Every(200*time.Millisecond).NoError(t, fmt.Sprintf("gateway %d: a working chat within %s of NATS being back", gw, d), func() error {
		msg := fmt.Sprintf("after %d-%d", gw, i)
		resp := c.do(gw, http.MethodPost, "/api/chat", map[string]any{"message": msg, "session": fmt.Sprintf("after-%d-%d", gw, i)})
		i++
		if resp.StatusCode == http.StatusOK {
			evs := allWithin(t, waggletest.NewStream(resp), d)
			if last(evs).Name == "done" && waggletest.Text(evs) == "re: "+msg {
				return nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", time.Since(since).Round(10*time.Millisecond), waggletest.Names(evs)))
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tried = append(tried, fmt.Sprintf("%s: %d %s", time.Since(since).Round(10*time.Millisecond), resp.StatusCode, strings.TrimSpace(string(b))))
		}
		return fmt.Errorf("tried: %v", tried)
	})
	// A chat that started in time but ended late is still too late.
	if time.Since(since) > d {
		t.Errorf("gateway %d: first working chat %s after NATS was back (tried: %v)", gw, time.Since(since), tried)
	}
}

// readAll reads st until it ends, failing if that takes longer than d.
func readAll(t *testing.T, st *waggletest.Stream, d time.Duration) []waggletest.Event {
	t.Helper()
	timer := time.AfterFunc(d, func() { st.Close() })
	defer timer.Stop()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("stream did not end within %s: %v (%v)", d, waggletest.Names(out), err)
		}
		out = append(out, ev)
	}
}
