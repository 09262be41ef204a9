package sessions

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
)

// TestAppendsRacingRewritesLoseNothing races, on one session at a time,
// real chat turns and store appends against renames, listings (which write
// a lazy summary back) and summary requests, then counts every line.
func TestAppendsRacingRewritesLoseNothing(t *testing.T) {
	srv, nc := startWithBus(t)
	const (
		rounds       = 6
		chatters     = 2
		turnsEach    = 3
		appenders    = 4
		appendsEach  = 10
		rewriters    = 3
		rewritesEach = 8
	)
	for round := range rounds {
		id := fmt.Sprintf("race-%d", round)
		// Four messages and no summary: the first listing or summary
		// request writes one back while appends are running.
		writeSession(t, srv, "default", id, append([]string{`{"type":"meta","title":null,"created":"2026-03-09T09:00:00.000Z"}`}, q2[:4]...)...)

		var wg sync.WaitGroup
		for c := range chatters {
			wg.Go(func() {
				for i := range turnsEach {
					evs := srv.Chat(map[string]any{"message": fmt.Sprintf("chat %d-%d", c, i), "workspace": "default", "session": id}).All(t)
					if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
						t.Errorf("chat turn did not finish: %v", evs)
					}
				}
			})
		}
		for a := range appenders {
			wg.Go(func() {
				for i := range appendsEach {
					m := protocol.Message{Role: "user", Content: fmt.Sprintf("append %d-%d", a, i)}
					if _, err := request(t, nc, protocol.AppendToSession, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: "default", Session: id}, Message: &m}); err != nil {
						t.Errorf("append: %v", err)
					}
				}
			})
		}
		for r := range rewriters {
			wg.Go(func() {
				for i := range rewritesEach {
					switch (r + i) % 3 {
					case 0:
						if st, _, b := raw(t, srv, "PATCH", "/api/sessions/"+id, map[string]any{"title": fmt.Sprintf("title %d-%d", r, i)}); st != 200 {
							t.Errorf("rename: %d %s", st, b)
						}
					case 1:
						list(t, srv, "default", "")
					default:
						if st, _, b := raw(t, srv, "GET", "/api/sessions/"+id+"/summary?workspace=default", nil); st != 200 {
							t.Errorf("summary: %d %s", st, b)
						}
					}
				}
			})
		}
		wg.Wait()

		lines := fileLines(t, sessionPath(srv, "default", id))
		if lines[0]["type"] != "meta" || !strings.HasPrefix(fmt.Sprint(lines[0]["title"]), "title ") || lines[0]["summary"] == nil {
			t.Fatalf("round %d: meta after the race: %v", round, lines[0])
		}
		seen := map[string]int{}
		for _, l := range lines[1:] {
			if c, ok := l["content"].(string); ok {
				seen[c]++
			}
		}
		wantLines := 4 + chatters*turnsEach*2 + appenders*appendsEach
		if len(lines)-1 != wantLines {
			t.Fatalf("round %d: %d message lines, want %d", round, len(lines)-1, wantLines)
		}
		for c := range chatters {
			for i := range turnsEach {
				if n := seen[fmt.Sprintf("chat %d-%d", c, i)]; n != 1 {
					t.Errorf("round %d: chat %d-%d stored %d times", round, c, i, n)
				}
			}
		}
		for a := range appenders {
			for i := range appendsEach {
				if n := seen[fmt.Sprintf("append %d-%d", a, i)]; n != 1 {
					t.Errorf("round %d: append %d-%d stored %d times", round, a, i, n)
				}
			}
		}
		// The listing agrees with the file.
		if s := find(list(t, srv, "default", ""), id); s == nil || s.MessageCount != wantLines {
			t.Fatalf("round %d: listed %+v, want %d messages", round, s, wantLines)
		}
	}
}

// TestDeleteEvictsEverywhere: deleting a session announces the eviction on
// the bus, and the next turn on that id starts from an empty history.
func TestDeleteEvictsEverywhere(t *testing.T) {
	srv, nc := startWithBus(t)
	evicted := make(chan protocol.SessionEvicted, 4)
	sub, err := nc.Subscribe(protocol.SessionEvictions.Subject, func(m *nats.Msg) {
		var ev protocol.SessionEvicted
		if json.Unmarshal(m.Data, &ev) == nil {
			evicted <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	srv.Chat(map[string]any{"message": "remember me", "workspace": "default", "session": "gone"}).All(t)
	expect(t, srv, "DELETE", "/api/sessions/gone", nil, 200, `{"deleted":true}`)
	select {
	case ev := <-evicted:
		if ev.Workspace != "default" || ev.Session != "gone" {
			t.Fatalf("evicted %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no eviction published")
	}
	srv.Chat(map[string]any{"message": "fresh start", "workspace": "default", "session": "gone"}).All(t)
	var hist struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	srv.JSON("GET", "/api/history?workspace=default&session=gone", nil, &hist)
	if len(hist.Messages) != 2 || hist.Messages[0].Content != "fresh start" {
		t.Fatalf("history after delete: %+v", hist.Messages)
	}

	// Deleting a workspace evicts each of its sessions.
	ws := createWorkspace(t, srv, "Doomed")
	createSession(t, srv, ws, map[string]any{"title": "a"})
	expect(t, srv, "DELETE", "/api/workspaces/"+ws, nil, 200, `{"deleted":true}`)
	select {
	case ev := <-evicted:
		if ev.Workspace != ws {
			t.Fatalf("evicted %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no eviction for the workspace's session")
	}
}
