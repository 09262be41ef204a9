package teams_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

const storeUnavailable = `{"error":"The database is unavailable. Try again in a moment.","code":"STORE_UNAVAILABLE"}` + "\n"

// TestPostgresRestart: the team server's PostgreSQL is stopped and started
// again. During the outage every request that needs it answers 503
// STORE_UNAVAILABLE at once (never a 500, never an event stream); the
// connection pool recovers by itself; nothing written before is lost.
func TestPostgresRestart(t *testing.T) {
	pg := pgtest.NewRestartable(t)
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pg.URL
		c.SessionStore.Store = "postgres"
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	}))
	nc := srv.DialNATS()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	olga := bearer(waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token)

	// Before the outage: a team workspace and a finished turn in it.
	var ws map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, olga...); st != 200 && st != 201 {
		t.Fatalf("create workspace: %d %v", st, ws)
	}
	id := fmt.Sprint(ws["id"])
	evs := srv.Chat(map[string]any{"message": "before the outage", "workspace": id, "session": "s1"}, olga...).All(t)
	if last := evs[len(evs)-1]; last.Name != "done" {
		t.Fatalf("turn before the outage: %v", waggletest.Names(evs))
	}
	history := "/api/history?workspace=" + id + "&session=s1"

	pg.Stop(t)
	for _, req := range []struct{ method, path, body string }{
		{"GET", history, ""},
		{"GET", "/api/workspaces", ""},
		{"GET", "/api/workspaces/" + id + "/sessions", ""},
		{"POST", "/api/chat", `{"message":"during the outage","workspace":"` + id + `","session":"s1"}`},
		{"GET", "/api/teams", ""},
	} {
		began := time.Now()
		var body any
		if req.body != "" {
			body = req.body
		}
		resp := srv.Do(req.method, req.path, body, olga...)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || string(data) != storeUnavailable {
			t.Errorf("%s %s during the outage: %d %s", req.method, req.path, resp.StatusCode, data)
		}
		if ct := resp.Header.Get("Content-Type"); ct == "text/event-stream" {
			t.Errorf("%s %s during the outage started an event stream", req.method, req.path)
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Errorf("%s %s took %s to fail", req.method, req.path, took)
		}
	}

	pg.Start(t)
	h := historyWhenBack(t, srv, history, olga)
	if len(h.Messages) != 2 || h.Messages[0].Content != "before the outage" || h.Messages[1].Role != "assistant" {
		t.Fatalf("history after the restart: %+v", h.Messages)
	}
	// Writes work again, and the refused chat left nothing behind.
	evs = srv.Chat(map[string]any{"message": "after the outage", "workspace": id, "session": "s1"}, olga...).All(t)
	if last := evs[len(evs)-1]; last.Name != "done" {
		t.Fatalf("turn after the outage: %v", waggletest.Names(evs))
	}
	if st := srv.JSON("GET", history, nil, &h, olga...); st != 200 || len(h.Messages) != 4 || h.Messages[2].Content != "after the outage" {
		t.Fatalf("history after a new turn: %d %+v", st, h.Messages)
	}
}

type historyReply struct {
	Messages []struct{ Role, Content string }
}

// historyWhenBack polls a history route until it answers 200, failing
// unless that happens within 10 s. The pool reconnects by itself: the first
// requests after the restart may still meet a dead pooled connection (503).
func historyWhenBack(t *testing.T, srv *waggletest.Server, path string, headers []string) historyReply {
	t.Helper()
	back := time.Now()
	var h historyReply
	waitfor.Within(10*time.Second).Every(100*time.Millisecond).NoError(t, "history after PostgreSQL was back", func() error {
		resp := srv.Do("GET", path, nil, headers...)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(data, &h); err != nil {
				t.Fatal(err)
			}
			return nil
		}
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("history %s after PostgreSQL was back: %d %s", time.Since(back), resp.StatusCode, data)
		}
		return fmt.Errorf("%d %s", resp.StatusCode, data)
	})
	t.Logf("history answered %s after PostgreSQL was back", time.Since(back).Round(10*time.Millisecond))
	return h
}

// TestPostgresRestartLocalAuth: the same outage with --store=postgres but
// no team auth, so requests reach the store itself. Store routes answer 503
// STORE_UNAVAILABLE; a chat is accepted by a runner before its message is
// saved, so it ends in a clean error event (never a 500) and saves nothing.
func TestPostgresRestartLocalAuth(t *testing.T) {
	pg := pgtest.NewRestartable(t)
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pg.URL
		c.SessionStore.Store = "postgres"
	}))
	if evs := srv.Chat(map[string]any{"message": "before the outage", "session": "s1"}).All(t); evs[len(evs)-1].Name != "done" {
		t.Fatalf("turn before the outage: %v", waggletest.Names(evs))
	}
	history := "/api/history?workspace=default&session=s1"

	pg.Stop(t)
	for _, path := range []string{history, "/api/workspaces", "/api/workspaces/default/sessions"} {
		resp := srv.Do("GET", path, nil)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || string(data) != storeUnavailable {
			t.Errorf("GET %s during the outage: %d %s", path, resp.StatusCode, data)
		}
	}
	evs := srv.Chat(map[string]any{"message": "during the outage", "session": "s1"}).All(t)
	var e struct{ Message string }
	evs[len(evs)-1].Decode(t, &e)
	if len(evs) != 1 || evs[0].Name != "error" || e.Message != "Could not save your message. Try sending it again." {
		t.Errorf("chat during the outage: %v %s", waggletest.Names(evs), evs[len(evs)-1].Data)
	}

	pg.Start(t)
	h := historyWhenBack(t, srv, history, nil)
	if len(h.Messages) != 2 || h.Messages[0].Content != "before the outage" {
		t.Fatalf("history after the restart: %+v", h.Messages)
	}
}
