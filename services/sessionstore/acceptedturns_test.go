package sessionstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/sessionstore/acceptedturns"
)

// storeEnv is a session-store service on a real embedded NATS, with the
// data dir kept so a test can stop it and start another on the same dir.
type storeEnv struct {
	t       testing.TB
	pgURL   string // all-PostgreSQL mode when set
	srv     *natstest.Server
	nc      *nats.Conn
	dataDir string
	svc     *sessionstore.Service
}

func startStore(t testing.TB) *storeEnv { return startStoreOn(t, "") }

// startStoreOn starts the store with every workspace in PostgreSQL at
// pgURL, or in JSONL files when pgURL is "".
func startStoreOn(t testing.TB, pgURL string) *storeEnv {
	t.Helper()
	srv := natstest.Start(t)
	e := &storeEnv{t: t, pgURL: pgURL, srv: srv, nc: srv.Conn("test"), dataDir: t.TempDir()}
	e.start()
	return e
}

// eachStore runs f on a JSONL store and on an all-PostgreSQL one (whose
// journal is a file of the store process too, its histories in
// PostgreSQL).
func eachStore(t *testing.T, f func(t *testing.T, e *storeEnv)) {
	t.Run("jsonl", func(t *testing.T) { f(t, startStoreOn(t, "")) })
	t.Run("postgres", func(t *testing.T) { f(t, startStoreOn(t, pgtest.URL(t))) })
}

func (e *storeEnv) start() {
	e.t.Helper()
	cfg := sessionstore.Config{DataDir: e.dataDir}
	if e.pgURL != "" {
		cfg.PostgresURL, cfg.Store = e.pgURL, sessionstore.StorePostgres
	}
	svc := sessionstore.New(cfg, e.srv.Dial, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := svc.Start(ctx); err != nil {
		e.t.Fatalf("start store: %v", err)
	}
	e.svc = svc
	e.t.Cleanup(func() { _ = svc.Stop(context.Background()) })
}

// restart stops the store and starts another on the same data dir.
func (e *storeEnv) restart() {
	e.t.Helper()
	if err := e.svc.Stop(context.Background()); err != nil {
		e.t.Fatalf("stop store: %v", err)
	}
	e.start()
}

func (e *storeEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *storeEnv) openTurns() []protocol.AcceptedTurn {
	e.t.Helper()
	rep, err := bus.Call(e.ctx(), e.nc, protocol.OpenTurns, protocol.OpenTurnsRequest{})
	if err != nil {
		e.t.Fatalf("open turns: %v", err)
	}
	return rep.Turns
}

func (e *storeEnv) openIDs() []string {
	e.t.Helper()
	var out []string
	for _, r := range e.openTurns() {
		out = append(out, r.Request.TurnID)
	}
	return out
}

func (e *storeEnv) append(req protocol.AppendRequest) (protocol.AppendReply, error) {
	return bus.Call(e.ctx(), e.nc, protocol.AppendToSession, req)
}

func (e *storeEnv) history(ref protocol.SessionRef) []protocol.Message {
	e.t.Helper()
	rep, err := bus.Call(e.ctx(), e.nc, protocol.ReadHistory, protocol.HistoryRequest{SessionRef: ref})
	if err != nil {
		e.t.Fatalf("history: %v", err)
	}
	return rep.Messages
}

func (e *storeEnv) journal() string {
	e.t.Helper()
	data, err := os.ReadFile(acceptedturns.Path(e.dataDir))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

func accepted(ws, session, turn string, place uint64) protocol.AcceptedTurn {
	return protocol.AcceptedTurn{
		Request:  protocol.TurnRequest{TurnID: turn, Workspace: ws, Session: session, Message: "question of " + turn},
		Place:    place,
		Accepted: time.Now().UnixMilli(),
	}
}

// userAppend is a turn's user message, recorded as accepted with it.
func userAppend(acc protocol.AcceptedTurn) protocol.AppendRequest {
	r := acc.Request
	return protocol.AppendRequest{
		SessionRef: protocol.SessionRef{Workspace: r.Workspace, Session: r.Session},
		Message:    &protocol.Message{Role: "user", Content: r.Message, TurnID: r.TurnID},
		Key:        protocol.AppendKey(r.TurnID, "user"),
		Accepted:   &acc,
	}
}

func replyAppend(ref protocol.SessionRef, turn string) protocol.AppendRequest {
	return protocol.AppendRequest{SessionRef: ref,
		Message: &protocol.Message{Role: "assistant", Content: "answer of " + turn, TurnID: turn},
		Key:     protocol.AppendKey(turn, "assistant")}
}

func wantKind(t *testing.T, err error, kind protocol.Kind) {
	t.Helper()
	if e := protocol.AsError(err); e == nil || e.Kind != kind {
		t.Fatalf("want %s, got %v", kind, err)
	}
}

// A turn whose user message is appended with Accepted is open — through a
// tool event of its own — until its reply is appended, and the reply's
// append itself writes the close (no history check needed).
func TestAcceptedTurnIsOpenUntilItsReply(t *testing.T) {
	eachStore(t, func(t *testing.T, e *storeEnv) {
		ref := protocol.SessionRef{Workspace: "default", Session: "s1"}
		acc := accepted("default", "s1", "turn-1", 42)
		if _, err := e.append(userAppend(acc)); err != nil {
			t.Fatal(err)
		}
		got := e.openTurns()
		if len(got) != 1 || got[0].Request != acc.Request || got[0].Place != 42 || got[0].Accepted != acc.Accepted {
			t.Fatalf("open turns = %+v, want [%+v]", got, acc)
		}
		tool := protocol.AppendRequest{SessionRef: ref, Key: protocol.AppendKey("turn-1", "tool", "assistant"),
			Tool: &protocol.ToolEvent{TurnID: "turn-1", CallID: "c1", Name: "bash", Input: []byte(`{}`), Status: "success"}}
		if _, err := e.append(tool); err != nil {
			t.Fatal(err)
		}
		if ids := e.openIDs(); !slices.Equal(ids, []string{"turn-1"}) {
			t.Fatalf("open after a tool event = %v, want [turn-1]", ids)
		}
		if _, err := e.append(replyAppend(ref, "turn-1")); err != nil {
			t.Fatal(err)
		}
		if j := e.journal(); !strings.Contains(j, `{"op":"close","turn":"turn-1"}`) {
			t.Fatalf("the reply's append wrote no close:\n%s", j)
		}
		if ids := e.openIDs(); len(ids) != 0 {
			t.Fatalf("open after the reply = %v, want none", ids)
		}
		if n := len(e.history(ref)); n != 2 {
			t.Fatalf("history holds %d messages, want 2", n)
		}
	})
}

// A turn recorded while it waits survives a restart of the store; its
// user message's append later keeps its first place; CloseTurn ends it
// for good.
func TestRecordedTurnSurvivesARestart(t *testing.T) {
	eachStore(t, func(t *testing.T, e *storeEnv) {
		acc := accepted("default", "s1", "queued", 7)
		if _, err := bus.Call(e.ctx(), e.nc, protocol.RecordTurn, acc); err != nil {
			t.Fatal(err)
		}
		e.restart()
		got := e.openTurns()
		if len(got) != 1 || got[0].Request != acc.Request || got[0].Place != 7 {
			t.Fatalf("open after restart = %+v, want [%+v]", got, acc)
		}
		later := acc
		later.Place, later.Accepted = 99, acc.Accepted+5000
		if _, err := e.append(userAppend(later)); err != nil {
			t.Fatal(err)
		}
		if got := e.openTurns(); len(got) != 1 || got[0].Place != 7 || got[0].Accepted != acc.Accepted {
			t.Fatalf("open after the user message = %+v, want its first place 7", got)
		}
		ref := protocol.SessionRef{Workspace: "default", Session: "s1"}
		if _, err := bus.Call(e.ctx(), e.nc, protocol.CloseTurn, protocol.CloseTurnRequest{SessionRef: ref, TurnID: "queued"}); err != nil {
			t.Fatal(err)
		}
		e.restart()
		if ids := e.openIDs(); len(ids) != 0 {
			t.Fatalf("open after CloseTurn and a restart = %v", ids)
		}
	})
}

// A crash lost the close written by a turn's reply (closes are not
// fsynced): OpenTurns finds the reply in the session's history, leaves
// the turn out and closes it.
func TestTurnWhoseCloseWasLostIsNotListed(t *testing.T) {
	eachStore(t, func(t *testing.T, e *storeEnv) {
		ref := protocol.SessionRef{Workspace: "default", Session: "s1"}
		for _, id := range []string{"answered", "running"} {
			if _, err := e.append(userAppend(accepted("default", "s1", id, 1))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.append(replyAppend(ref, "answered")); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		// What the crash left: the journal without its last line, the close.
		path := acceptedturns.Path(e.dataDir)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
		if !strings.Contains(lines[len(lines)-1], `"close"`) {
			t.Fatalf("journal's last line is not the close:\n%s", data)
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
			t.Fatal(err)
		}
		e.start()
		if ids := e.openIDs(); !slices.Equal(ids, []string{"running"}) {
			t.Fatalf("open = %v, want [running]: the answered turn's reply is in history", ids)
		}
		if j := e.journal(); !strings.Contains(j, `{"op":"close","turn":"answered"}`) {
			t.Fatalf("OpenTurns did not close the answered turn:\n%s", j)
		}
	})
}

// An Accepted that does not describe the appended user message's turn is
// refused as invalid, and neither the line nor the record is stored.
func TestMismatchedAcceptedIsRefused(t *testing.T) {
	good := accepted("default", "s1", "t1", 1)
	for _, tc := range []struct {
		name   string
		mutate func(*protocol.AppendRequest)
	}{
		{"another turn's key", func(r *protocol.AppendRequest) { r.Key = protocol.AppendKey("t2", "user") }},
		{"no key", func(r *protocol.AppendRequest) { r.Key = "" }},
		{"another session", func(r *protocol.AppendRequest) { r.Session = "s2" }},
		{"another workspace", func(r *protocol.AppendRequest) { r.Workspace = "other" }},
		{"the message of another turn", func(r *protocol.AppendRequest) { r.Message.TurnID = "t2" }},
		{"an assistant message", func(r *protocol.AppendRequest) {
			r.Message.Role = "assistant"
			r.Key = protocol.AppendKey("t1", "assistant")
		}},
		{"a tool event", func(r *protocol.AppendRequest) {
			r.Message = nil
			r.Tool = &protocol.ToolEvent{TurnID: "t1", CallID: "c", Name: "bash", Input: []byte(`{}`)}
		}},
		{"an invalid turn id", func(r *protocol.AppendRequest) {
			r.Accepted.Request.TurnID = "../x"
			r.Key = protocol.AppendKey("../x", "user")
		}},
		{"no message", func(r *protocol.AppendRequest) { r.Accepted.Request.Message = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startStore(t)
			acc := good
			req := userAppend(acc)
			m := *req.Message
			req.Message = &m
			tc.mutate(&req)
			_, err := e.append(req)
			wantKind(t, err, protocol.Invalid)
			if ids := e.openIDs(); len(ids) != 0 {
				t.Fatalf("refused append recorded %v", ids)
			}
			for _, ref := range []protocol.SessionRef{{Workspace: "default", Session: "s1"}, req.SessionRef} {
				if h := e.history(ref); len(h) != 0 {
					t.Fatalf("refused append stored %+v", h)
				}
			}
		})
	}
}

// A user message whose append fails is not left open: the runner ends
// that turn with the error.
func TestFailedAppendLeavesNoOpenTurn(t *testing.T) {
	e := startStore(t)
	// A file where the session's directory should be: the append fails.
	dir := filepath.Join(e.dataDir, "workspaces", "broken")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.append(userAppend(accepted("broken", "s1", "t1", 1))); err == nil {
		t.Fatal("append into a broken workspace succeeded")
	}
	if ids := e.openIDs(); len(ids) != 0 {
		t.Fatalf("open after a failed append = %v, want none", ids)
	}
}

// OpenTurns answers by workspace, session, then place — not in the order
// the turns were recorded.
func TestOpenTurnsOrder(t *testing.T) {
	e := startStore(t)
	for _, acc := range []protocol.AcceptedTurn{
		accepted("wb", "s1", "b-s1-9", 9),
		accepted("wa", "s2", "a-s2-3", 3),
		accepted("wa", "s1", "a-s1-12", 12),
		accepted("wb", "s1", "b-s1-2", 2),
		accepted("wa", "s1", "a-s1-5", 5),
		accepted("wa", "s2", "a-s2-1", 1),
	} {
		if _, err := bus.Call(e.ctx(), e.nc, protocol.RecordTurn, acc); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a-s1-5", "a-s1-12", "a-s2-1", "a-s2-3", "b-s1-2", "b-s1-9"}
	if ids := e.openIDs(); !slices.Equal(ids, want) {
		t.Fatalf("open = %v, want %v", ids, want)
	}
}

// RecordTurn and CloseTurn refuse what they could not record or match.
func TestRecordAndCloseTurnRefuseBadRequests(t *testing.T) {
	e := startStore(t)
	bad := accepted("default", "s1", "t1", 1)
	bad.Request.Session = "a/b"
	_, err := bus.Call(e.ctx(), e.nc, protocol.RecordTurn, bad)
	wantKind(t, err, protocol.Invalid)
	empty := accepted("default", "s1", "t1", 1)
	empty.Request.Message = ""
	_, err = bus.Call(e.ctx(), e.nc, protocol.RecordTurn, empty)
	wantKind(t, err, protocol.Invalid)

	if _, err := bus.Call(e.ctx(), e.nc, protocol.RecordTurn, accepted("default", "s1", "t1", 1)); err != nil {
		t.Fatal(err)
	}
	_, err = bus.Call(e.ctx(), e.nc, protocol.CloseTurn, protocol.CloseTurnRequest{SessionRef: protocol.SessionRef{Workspace: "default", Session: "s2"}, TurnID: "t1"})
	wantKind(t, err, protocol.Invalid)
	_, err = bus.Call(e.ctx(), e.nc, protocol.CloseTurn, protocol.CloseTurnRequest{SessionRef: protocol.SessionRef{Workspace: "default", Session: "s1"}, TurnID: ""})
	wantKind(t, err, protocol.Invalid)
	if ids := e.openIDs(); !slices.Equal(ids, []string{"t1"}) {
		t.Fatalf("open = %v, want [t1]", ids)
	}
	// Closing a turn that is not open is no error, and writes nothing.
	before := e.journal()
	if _, err := bus.Call(e.ctx(), e.nc, protocol.CloseTurn, protocol.CloseTurnRequest{SessionRef: protocol.SessionRef{Workspace: "default", Session: "s1"}, TurnID: "never"}); err != nil {
		t.Fatal(err)
	}
	if after := e.journal(); !bytes.Equal([]byte(before), []byte(after)) {
		t.Fatalf("closing an unknown turn wrote:\n%s", after)
	}
}

// BenchmarkTurnAppends is a turn's two session appends over the bus, the
// user message and the reply: plain, and with the user message recording
// the turn as accepted (its journal record, fsync and close).
func BenchmarkTurnAppends(b *testing.B) {
	for _, withRecord := range []bool{false, true} {
		name := "plain"
		if withRecord {
			name = "accepted"
		}
		b.Run(name, func(b *testing.B) {
			e := startStore(b)
			ref := protocol.SessionRef{Workspace: "default", Session: "bench"}
			for i := 0; b.Loop(); i++ {
				turn := fmt.Sprintf("turn-%d", i)
				user := userAppend(accepted("default", "bench", turn, uint64(i)))
				if !withRecord {
					user.Accepted = nil
				}
				if _, err := e.append(user); err != nil {
					b.Fatal(err)
				}
				if _, err := e.append(replyAppend(ref, turn)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
