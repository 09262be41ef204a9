// Package notifyapi serves the desktop notifications in the original's
// shapes: GET /api/notifications/stream (SSE), GET /api/notifications and
// /api/notifications/history, POST|PATCH /api/notifications/{id}/read and
// POST /api/notifications/read-all.
//
// Runners publish protocol.Notifications (a turn that finished with no
// client attached, an approval waiting with none, a workflow captured);
// every gateway keeps the latest MaxHistory per user in memory and relays
// new ones to that user's streams. The history is this gateway's since
// it started: a restart empties it, and read marks are per gateway.
//
// Who may call: locally any client the edge lets through (one user);
// on a team server any authenticated user, who sees only their own.
package notifyapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/sse"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// MaxHistory is how many notifications are kept per user.
const MaxHistory = 200

// heartbeat is how often an idle stream gets a comment.
const heartbeat = 30 * time.Second

// Entry is a notification as clients see it.
type Entry struct {
	protocol.Notification
	Read bool `json:"read"`
}

// MarshalJSON leaves the user out: it is the key, not the content.
func (e Entry) MarshalJSON() ([]byte, error) {
	n := e.Notification
	n.User = ""
	return json.Marshal(struct {
		protocol.Notification
		Read bool `json:"read"`
	}{n, e.Read})
}

// Hub keeps the history and the open streams.
type Hub struct {
	log  *slog.Logger
	done <-chan struct{}

	mu      sync.Mutex
	history map[string][]*Entry // by user, oldest first
	streams map[chan Entry]string
}

// New returns a hub whose streams end when done closes (the gateway's
// shutdown).
func New(log *slog.Logger, done <-chan struct{}) *Hub {
	return &Hub{log: log, done: done, history: map[string][]*Entry{}, streams: map[chan Entry]string{}}
}

// Subscribe starts taking notifications from the bus; the subscription
// ends with nc.
func (h *Hub) Subscribe(nc *nats.Conn) (*nats.Subscription, error) {
	return bus.Subscribe(nc, protocol.Notifications, h.add)
}

func (h *Hub) add(n protocol.Notification) {
	if n.ID == "" || !protocol.ValidID(n.ID) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e := &Entry{Notification: n}
	list := append(h.history[n.User], e)
	if len(list) > MaxHistory {
		list = append([]*Entry(nil), list[len(list)-MaxHistory:]...)
	}
	h.history[n.User] = list
	for ch, user := range h.streams {
		if user != n.User {
			continue
		}
		select {
		case ch <- *e:
		default: // a stream that does not keep up misses it; the history has it
		}
	}
}

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps, h *Hub, origin func(*http.Request) string) {
	a := api{d: d, h: h, origin: origin}
	r.Get("/notifications/stream", a.stream)
	r.Get("/notifications", a.list)
	r.Get("/notifications/history", a.list)
	r.Post("/notifications/{id}/read", a.read)
	r.Patch("/notifications/{id}/read", a.read)
	r.Post("/notifications/read-all", a.readAll)
}

type api struct {
	d      forward.Deps
	h      *Hub
	origin func(*http.Request) string
}

// user is the history a request reads: the team-server user, "" locally.
func user(r *http.Request) string {
	sc, _ := teamauth.ScopeFrom(r.Context())
	return sc.User
}

func (a api) stream(w http.ResponseWriter, r *http.Request) {
	ch := make(chan Entry, 16)
	u := user(r)
	a.h.mu.Lock()
	a.h.streams[ch] = u
	a.h.mu.Unlock()
	defer func() {
		a.h.mu.Lock()
		delete(a.h.streams, ch)
		a.h.mu.Unlock()
	}()
	out, err := sse.Start(w, map[string]string{"Access-Control-Allow-Origin": a.origin(r)})
	if err != nil {
		a.d.Log.Error("notification stream start", "err", err)
		return
	}
	if out.Event(0, "message", []byte(`{"type":"connected"}`)) != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case e := <-ch:
			data, err := json.Marshal(e)
			if err != nil || out.Event(0, "message", data) != nil {
				return
			}
		case <-tick.C:
			if out.Comment("heartbeat") != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-a.h.done:
			return
		}
	}
}

// list answers {notifications, count, unread}, newest first; ?unread=true
// keeps the unread ones, ?limit= (default 100, at most MaxHistory).
func (a api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			respond.Error(w, a.d.Log, protocol.Errorf(protocol.Invalid, "limit must be a positive number"))
			return
		}
		limit = min(n, MaxHistory)
	}
	unreadOnly := q.Get("unread") == "true"
	a.h.mu.Lock()
	list := a.h.history[user(r)]
	out := make([]Entry, 0, min(limit, len(list)))
	unread := 0
	for i := len(list) - 1; i >= 0; i-- {
		e := list[i]
		if !e.Read {
			unread++
		}
		if len(out) < limit && (!unreadOnly || !e.Read) {
			out = append(out, *e)
		}
	}
	a.h.mu.Unlock()
	respond.JSON(w, http.StatusOK, map[string]any{"notifications": out, "count": len(out), "unread": unread})
}

func (a api) read(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	a.h.mu.Lock()
	found := false
	for _, e := range a.h.history[user(r)] {
		if e.ID == id {
			e.Read, found = true, true
			break
		}
	}
	a.h.mu.Unlock()
	if !found {
		respond.Error(w, a.d.Log, protocol.Errorf(protocol.NotFound, "Notification not found"))
		return
	}
	respond.JSON(w, http.StatusOK, map[string]any{"read": true, "id": id})
}

func (a api) readAll(w http.ResponseWriter, r *http.Request) {
	a.h.mu.Lock()
	n := 0
	for _, e := range a.h.history[user(r)] {
		if !e.Read {
			e.Read = true
			n++
		}
	}
	a.h.mu.Unlock()
	respond.JSON(w, http.StatusOK, map[string]any{"markedRead": n})
}
