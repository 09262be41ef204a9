package desktop

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

type notification struct {
	ID, Type, Title, Body, Category, WorkspaceID string
	Read                                         bool
}

// TestTurnFinishedAloneNotifies: the user closes the chat while the agent
// works; when the turn finishes, the notification stream says so, and the
// history keeps it until it is marked read. A turn the user watched to
// the end raises none.
func TestTurnFinishedAloneNotifies(t *testing.T) {
	pause := llmtest.NewPause()
	llm := newLLM(t, llmtest.WithResponses(
		llmtest.Reply("watched"),
		llmtest.Response{Steps: []llmtest.Step{llmtest.Wait(pause), llmtest.Content("finished while you were away")}},
	))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()),
		waggletest.WithConfig(func(c *app.Config) {
			c.NATSListen = waggletest.FreeAddr(t)
			c.TurnRunner.DisconnectGrace = 5 * time.Minute // the turn outlives its client
		}))

	resp := srv.Do("GET", "/api/notifications/stream", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	notes := waggletest.NewStream(resp)
	defer notes.Close()
	if ev, err := notes.Next(); err != nil || string(ev.Data) != `{"type":"connected"}` {
		t.Fatalf("first event %+v %v", ev, err)
	}
	events := make(chan waggletest.Event, 4)
	go func() {
		defer close(events)
		for {
			ev, err := notes.Next()
			if err != nil {
				return
			}
			events <- ev
		}
	}()

	turn(t, srv, "watch this one") // watched to the end: no notification

	nc := srv.DialNATS()
	defer nc.Close()
	st := srv.Chat(chat("take your time"))
	turnID := st.Resp.Header.Get("X-Waggle-Turn-Id")
	control := protocol.TurnControl(turnID).Subject
	detached := make(chan struct{})
	sub, err := nc.Subscribe(control, func(m *nats.Msg) {
		var c protocol.TurnControlMsg
		if json.Unmarshal(m.Data, &c) == nil && c.Action == protocol.ControlDetach {
			select {
			case <-detached:
			default:
				close(detached)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pause.Reached():
	case <-time.After(10 * time.Second):
		t.Fatal("the model was not asked")
	}
	st.Close() // the user walks away
	select {
	case <-detached:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not report the client gone")
	}
	// The runner handles a turn's control messages in order: once it
	// answers this probe, it has seen the detach.
	probe, _ := json.Marshal(protocol.TurnControlMsg{Action: protocol.ControlProbe})
	if _, err := nc.Request(control, probe, 10*time.Second); err != nil {
		t.Fatalf("probe: %v", err)
	}
	pause.Release()

	var got notification
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the notification stream ended")
		}
		ev.Decode(t, &got)
	case <-time.After(20 * time.Second):
		t.Fatal("no notification for a turn that finished with no client")
	}
	if got.Title != "Agent finished" || got.Category != "agent" || got.WorkspaceID != "desk" || got.Type != "notification" {
		t.Fatalf("notification %+v", got)
	}

	var hist struct {
		Notifications []notification
		Count, Unread int
	}
	if code := srv.JSON("GET", "/api/notifications/history", nil, &hist); code != http.StatusOK || hist.Count != 1 || hist.Unread != 1 || hist.Notifications[0].ID != got.ID {
		t.Fatalf("history: %d %+v", code, hist)
	}
	var marked struct{ MarkedRead int }
	if code := srv.JSON("POST", "/api/notifications/read-all", nil, &marked); code != http.StatusOK || marked.MarkedRead != 1 {
		t.Fatalf("read-all: %d %+v", code, marked)
	}
	if code := srv.JSON("GET", "/api/notifications?unread=true", nil, &hist); code != http.StatusOK || hist.Count != 0 || hist.Unread != 0 {
		t.Fatalf("unread after read-all: %d %+v", code, hist)
	}
	if code := srv.JSON("PATCH", "/api/notifications/"+got.ID+"/read", nil, nil); code != http.StatusOK {
		t.Fatalf("mark read: %d", code)
	}
	if code := srv.JSON("PATCH", "/api/notifications/nope/read", nil, nil); code != http.StatusNotFound {
		t.Fatalf("mark unknown read: %d", code)
	}
}
