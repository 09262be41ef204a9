package turn

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// The turn's end, seen from outside: what is on disk and what the client
// was told, in which order. The session store is a real bus service on an
// embedded NATS (the turn's store calls go over the bus); the turn's
// ownership and event writer are fakes of its narrow interfaces that write
// what happens to them into the same log as the store.

// record is the ordered log of one turn's effects.
type record struct {
	mu  sync.Mutex
	log []string
}

func (r *record) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *record) entries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// index is the position of the first entry equal to s, -1 if none.
func (r *record) index(s string) int { return slices.Index(r.entries(), s) }

// fakeEvents is the turn's event writer: it logs what a client sees of
// what the turn publishes. Events published while held are seen when they
// are released, or never.
type fakeEvents struct {
	rec  *record
	mu   sync.Mutex
	held []string // nil when not holding
	last uint64
}

func (e *fakeEvents) publish(kind, event string, data any) error {
	line := kind + ":" + event
	if td, ok := data.(protocol.TokenData); ok && event == protocol.EventToken {
		line += ":" + td.Content
	}
	if ed, ok := data.(protocol.ErrorData); ok {
		line += ":" + ed.Message
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last++
	if e.held != nil {
		e.held = append(e.held, line)
		return nil
	}
	e.rec.add(line)
	return nil
}

func (e *fakeEvents) Emit(event string, data any) error   { return e.publish("emit", event, data) }
func (e *fakeEvents) Note(event string, data any) error   { return e.publish("note", event, data) }
func (e *fakeEvents) Mark(event string, data any) error   { return e.publish("mark", event, data) }
func (e *fakeEvents) Finish(event string, data any) error { return e.publish("finish", event, data) }
func (e *fakeEvents) Hold()                               { e.set([]string{}, "hold") }
func (e *fakeEvents) Release()                            { e.set(nil, "release") }
func (e *fakeEvents) Discard()                            { e.set(nil, "discard") }
func (e *fakeEvents) ContinueAt(n uint64)                 { e.mu.Lock(); e.last = n; e.mu.Unlock() }
func (e *fakeEvents) Drain(time.Duration)                 {}
func (e *fakeEvents) Close()                              { e.rec.add("close") }

func (e *fakeEvents) Last() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// set starts (held not nil) or ends a hold, showing what was held on a
// release.
func (e *fakeEvents) set(held []string, what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec.add(what)
	if what == "release" {
		for _, line := range e.held {
			e.rec.add(line)
		}
	}
	e.held = held
}

// fakeOwnership is a turn that holds its session from the start.
type fakeOwnership struct{ rec *record }

func (o fakeOwnership) Join(context.Context, ownership.Mode) (string, error) { return "", nil }
func (o fakeOwnership) Place(context.Context) error                          { return nil }
func (o fakeOwnership) Placed() bool                                         { return true }
func (o fakeOwnership) Holds() bool                                          { return true }
func (o fakeOwnership) Wait(context.Context) error                           { return nil }
func (o fakeOwnership) Leave()                                               { o.rec.add("leave") }
func (o fakeOwnership) Renew(context.Context, bool)                          {}
func (o fakeOwnership) Drop()                                                { o.rec.add("drop") }
func (o fakeOwnership) Release(bool)                                         { o.rec.add("release lease") }
func (o fakeOwnership) Abandon()                                             { o.rec.add("abandon") }
func (o fakeOwnership) Record() protocol.AcceptedTurn                        { return protocol.AcceptedTurn{} }

// noModel is a model server that does not answer: echo mode.
type noModel struct{}

func (noModel) Last() llmprobe.Status          { return llmprobe.Status{} }
func (noModel) Available(context.Context) bool { return false }

// noSettings is a config.json with nothing set and an empty vault.
type noSettings struct{}

func (noSettings) Get() agent.ModelConfig                           { return agent.ModelConfig{} }
func (noSettings) ModelKey(context.Context, string, string) string  { return "" }
func (noSettings) SearchKey(context.Context, string, string) string { return "" }
func (noSettings) AutoSaveOn(string) bool                           { return false }

// nobody follows the turn.
type nobody struct{}

func (nobody) Followed() bool { return false }
func (nobody) Count() int     { return 0 }

// quiet is a logger that writes nothing.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// storeFails makes the test store refuse the append of a role.
type storeFails map[string]bool

// echoTurn runs one echo turn of message against a session store that
// refuses the roles in fails, and returns the log of its effects.
func echoTurn(t *testing.T, message string, fails storeFails) *record {
	t.Helper()
	srv := natstest.Start(t)
	rec := &record{}
	storeConn, runnerConn := srv.Conn("store"), srv.Conn("runner")
	svc, err := bus.NewService(storeConn, bus.ServiceConfig{Name: protocol.ServiceSessionStore, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	err = bus.Handle(svc, protocol.AppendToSession, func(_ context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
		if req.Message == nil {
			return protocol.AppendReply{}, protocol.Errorf(protocol.Invalid, "only messages in this test")
		}
		if fails[req.Message.Role] {
			rec.add("store refused " + req.Message.Role)
			return protocol.AppendReply{}, fmt.Errorf("disk full")
		}
		rec.add("stored " + req.Message.Role + ": " + req.Message.Content)
		return protocol.AppendReply{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := storeConn.Flush(); err != nil {
		t.Fatal(err)
	}
	d := &Deps{
		Conn: runnerConn, Log: quiet,
		Config:      Config{StoreTimeout: 5 * time.Second},
		ModelServer: noModel{}, Settings: noSettings{},
	}
	req := protocol.TurnRequest{TurnID: "t1", Workspace: "ws", Session: "s1", Message: message}
	tr := newTurn(d, req, fakeOwnership{rec}, nobody{})
	tr.pub = &fakeEvents{rec: rec}
	tr.Run()
	tr.Close()
	return rec
}

// before fails the test unless every entry of want is in rec, in that
// order.
func before(t *testing.T, rec *record, want ...string) {
	t.Helper()
	at := -1
	for _, w := range want {
		i := rec.index(w)
		if i < 0 {
			t.Fatalf("%q never happened; the turn did:\n%s", w, strings.Join(rec.entries(), "\n"))
		}
		if i < at {
			t.Fatalf("%q happened before %q; the turn did:\n%s", w, want[slices.Index(want, w)-1], strings.Join(rec.entries(), "\n"))
		}
		at = i
	}
}

// TestEchoTurnStoresBeforeItEnds: the user's message is on disk before a
// client sees anything of the turn, the reply is on disk before done, and
// the session is free before done (a next message sent on done never
// finds it busy); the lease goes last.
func TestEchoTurnStoresBeforeItEnds(t *testing.T) {
	rec := echoTurn(t, "hello there", nil)
	before(t, rec,
		"hold",
		"stored user: hello there",
		"release",
		"stored assistant: "+protocol.EchoText("hello there"),
		"leave",
		"finish:"+protocol.EventDone,
		"drop",
		"close")
	var streamed strings.Builder
	for _, e := range rec.entries() {
		if strings.HasPrefix(e, "finish:") && e != "finish:"+protocol.EventDone {
			t.Errorf("a second end: %s", e)
		}
		if tok, ok := strings.CutPrefix(e, "emit:"+protocol.EventToken+":"); ok {
			streamed.WriteString(tok)
		}
	}
	// Echo mode streams the reply a word at a time, each with its space.
	if want := protocol.EchoText("hello there") + " "; streamed.String() != want {
		t.Errorf("the client saw %q, want %q", streamed.String(), want)
	}
}

// TestReplyNotStoredEndsInError: a reply the store refuses ends the turn
// with an error that says so, never with done.
func TestReplyNotStoredEndsInError(t *testing.T) {
	rec := echoTurn(t, "hello", storeFails{protocol.RoleAssistant: true})
	before(t, rec, "stored user: hello", "store refused assistant",
		"finish:"+protocol.EventError+":Your reply could not be saved. Try sending your message again.")
	if rec.index("finish:"+protocol.EventDone) >= 0 {
		t.Fatalf("done after a reply that was not stored:\n%s", strings.Join(rec.entries(), "\n"))
	}
}

// TestUserMessageNotStoredShowsNothing: when the user's message cannot
// be stored, what the turn published meanwhile is dropped, nothing else
// is stored, and the turn ends with saveUserText.
func TestUserMessageNotStoredShowsNothing(t *testing.T) {
	rec := echoTurn(t, "hello", storeFails{protocol.RoleUser: true})
	before(t, rec, "hold", "store refused user", "discard", "finish:"+protocol.EventError+":"+saveUserText)
	for _, e := range rec.entries() {
		if strings.HasPrefix(e, "stored ") || e == "release" || e == "finish:"+protocol.EventDone {
			t.Errorf("after the user message failed: %s", e)
		}
	}
}
