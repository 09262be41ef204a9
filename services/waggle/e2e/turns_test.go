package e2e

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

func followTurn(t *testing.T, srv *waggletest.Server, turnID, query string, headers ...string) *waggletest.Stream {
	t.Helper()
	resp := srv.Do(http.MethodGet, "/api/chat/turns/"+turnID+"/events"+query, nil, headers...)
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("follow: status %d", resp.StatusCode)
	}
	return waggletest.NewStream(resp)
}

// TestSecondTabAndReplay: a second client follows a live turn and sees the
// same events; after the turn ends, replay from any Last-Event-ID returns
// exactly the rest.
func TestSecondTabAndReplay(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.TurnRunner.EchoDelay = 5 * time.Millisecond }))
	first := srv.Chat(map[string]any{"message": "follow me", "session": "tabs"})
	turn := first.Resp.Header.Get("X-Waggle-Turn-Id")
	// A turn is followable once it has published its first event.
	ev0, err := first.Next()
	if err != nil {
		t.Fatal(err)
	}
	second := followTurn(t, srv, turn, "")
	a, b := waggletest.Coalesced(append([]waggletest.Event{ev0}, first.All(t)...)), waggletest.Coalesced(second.All(t))
	if len(a) == 0 || !slices.EqualFunc(a, b, func(x, y waggletest.Event) bool {
		return x.ID == y.ID && x.Name == y.Name && string(x.Data) == string(y.Data)
	}) {
		t.Fatalf("second tab saw %v, first %v", waggletest.Names(b), waggletest.Names(a))
	}
	full := waggletest.Text(a)
	// Replay from any event id returns exactly what followed it (a replay
	// may deliver the tokens coalesced).
	for _, cut := range []int{0, 1, len(a) - 1} {
		var hdr []string
		var before string
		if cut > 0 {
			hdr = []string{"Last-Event-ID", strconv.FormatUint(a[cut-1].ID, 10)}
			before = waggletest.Text(a[:cut])
		}
		rest := waggletest.Coalesced(followTurn(t, srv, turn, "", hdr...).All(t))
		if before+waggletest.Text(rest) != full || rest[len(rest)-1].Name != "done" || rest[len(rest)-1].ID != a[len(a)-1].ID {
			t.Fatalf("replay after %d: %v", cut, waggletest.Names(rest))
		}
	}
	// ?after= works like the header.
	rest := followTurn(t, srv, turn, "?after="+strconv.FormatUint(a[len(a)-2].ID, 10)).All(t)
	if len(rest) != 1 || rest[0].Name != "done" {
		t.Fatalf("?after replay: %v", waggletest.Names(rest))
	}
}

func TestTurnRoutesErrors(t *testing.T) {
	srv := waggletest.Start(t)
	var out map[string]any
	if st := srv.JSON(http.MethodGet, "/api/chat/turns/no-such-turn/events", nil, &out); st != 404 || out["error"] != "Turn not found" {
		t.Errorf("unknown turn: %d %v", st, out)
	}
	if st := srv.JSON(http.MethodPost, "/api/chat/turns/no-such-turn/cancel", nil, &out); st != 404 {
		t.Errorf("cancel unknown: %d %v", st, out)
	}
	if st := srv.JSON(http.MethodGet, "/api/chat/turns/a.b/events", nil, &out); st != 400 {
		t.Errorf("unsafe id: %d %v", st, out)
	}
	if st := srv.JSON(http.MethodPost, "/api/agent/abort", "", &out); st != 400 || out["error"] != "workspaceId is required" {
		t.Errorf("abort without workspace: %d %v", st, out)
	}
	if st := srv.JSON(http.MethodPost, "/api/agent/abort", map[string]any{"workspaceId": "default"}, &out); st != 200 || out["ok"] != true {
		t.Errorf("abort: %d %v", st, out)
	}
}

// TestCancelFromAnywhere: POST cancel stops a running turn; its stream ends
// with an error event and the partial reply is kept.
func TestCancelFromAnywhere(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.TurnRunner.EchoDelay = 40 * time.Millisecond }))
	st := srv.Chat(map[string]any{"message": "a long reply to cancel", "session": "cx"})
	if ev, err := st.Next(); err != nil || ev.Name != "token" {
		t.Fatalf("first event %v %v", ev, err)
	}
	var out map[string]any
	if code := srv.JSON(http.MethodPost, "/api/chat/turns/"+st.Resp.Header.Get("X-Waggle-Turn-Id")+"/cancel", nil, &out); code != 200 {
		t.Fatalf("cancel: %d %v", code, out)
	}
	evs := st.All(t)
	last := evs[len(evs)-1]
	if last.Name != "error" || last.Content() != "" {
		var e struct{ Message string }
		last.Decode(t, &e)
		if last.Name != "error" || e.Message != "The turn was cancelled." {
			t.Fatalf("last event %s %s", last.Name, last.Data)
		}
	}
	var h struct {
		Messages []struct{ Role, Content string }
	}
	srv.JSON(http.MethodGet, "/api/history?session=cx", nil, &h)
	if len(h.Messages) != 2 || h.Messages[1].Content == "" {
		t.Fatalf("history %+v", h.Messages)
	}
}
