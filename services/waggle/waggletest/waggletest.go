// Package waggletest starts real waggle processes for black-box tests: the
// whole app in-process on an embedded NATS server, a temp data dir and a
// random port, plus helpers that speak real HTTP and parse real SSE bytes.
package waggletest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway"
	"github.com/waggle-os/core/services/turnrunner/runnerconfig"
	"github.com/waggle-os/core/services/waggle/app"
)

// Server is a running waggle app.
type Server struct {
	t       testing.TB
	App     *app.App
	Config  app.Config
	URL     string // http://127.0.0.1:<port>
	DataDir string
	stopped bool
}

// Option adjusts the config before start.
type Option func(*app.Config)

// WithLLM points the turn runner and /health at an OpenAI-compatible URL.
func WithLLM(url string) Option { return func(c *app.Config) { c.TurnRunner.LLMURL = url } }

// WithDataDir reuses a data dir (to test restarts).
func WithDataDir(dir string) Option { return func(c *app.Config) { c.DataDir = dir } }

// WithConfig edits the config freely.
func WithConfig(fn func(*app.Config)) Option { return Option(fn) }

// Start runs the app (all targets) and stops it at the end of the test.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := app.Config{
		DataDir:         t.TempDir(),
		ShutdownTimeout: 10 * time.Second,
		LogLevel:        slog.LevelWarn,
		Gateway:         gateway.Config{Addr: "127.0.0.1:0", MaxMessageLength: gateway.DefaultMaxMessageLength},
		TurnRunner:      runnerconfig.Config{LLMURL: unreachableURL(t)},
	}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{t: t, Config: cfg, DataDir: cfg.DataDir}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	level := slog.LevelWarn
	if os.Getenv("WAGGLE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	s.App = app.New(s.Config, log)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.App.Start(ctx); err != nil {
		s.t.Fatalf("waggletest: start: %v", err)
	}
	s.URL = "http://" + s.App.Addr()
	s.stopped = false
}

// Stop stops the app (idempotent).
func (s *Server) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.App.Stop(ctx); err != nil {
		s.t.Errorf("waggletest: stop: %v", err)
	}
}

// Restart stops the app and starts a new one on the same data dir and port.
func (s *Server) Restart() {
	s.t.Helper()
	addr := s.App.Addr()
	s.Stop()
	s.Config.Gateway.Addr = addr
	s.start()
}

// NATSAuth is the option that authenticates to the server's embedded NATS
// listener: its data dir's credentials (app.NATSCredentials), as `waggle
// team` and `nats --nkey` use them.
func (s *Server) NATSAuth() nats.Option {
	s.t.Helper()
	opt, err := embednats.ClientOption(app.NATSCredentials(s.DataDir))
	if err != nil {
		s.t.Fatalf("waggletest: NATS credentials: %v", err)
	}
	return opt
}

// DialNATS connects to the server's embedded NATS listener (Config.NATSListen
// must be set) with its credentials, as the operator's tools do. The
// connection closes at the end of the test, before the server stops.
func (s *Server) DialNATS() *nats.Conn {
	s.t.Helper()
	url := s.App.NATSURL()
	if url == "" {
		s.t.Fatal("waggletest: DialNATS: the server has no NATS listener (set Config.NATSListen)")
	}
	nc, err := nats.Connect(url, s.NATSAuth())
	if err != nil {
		s.t.Fatalf("waggletest: connect to %s: %v", url, err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// WithNATSOf makes the process dial hub's embedded NATS listener (another
// process of one installation): NATSURL and the hub's credentials.
func WithNATSOf(hub *Server) Option {
	return func(c *app.Config) {
		c.NATSURL, c.NATSNkey = hub.App.NATSURL(), app.NATSCredentials(hub.DataDir)
	}
}

// unreachableURL is a base URL on a port nothing listens on, so the model
// probe fails fast (connection refused) and turns run in echo mode.
func unreachableURL(t testing.TB) string { return "http://" + FreeAddr(t) + "/v1" }

// FreeAddr is a loopback host:port nothing listens on, for a listener a
// test configures before it starts (the embedded NATS server reads port 0
// as its default 4222, not as "any port") or a peer that must not answer.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Do sends a request with an optional JSON body (a string is sent as is).
func (s *Server) Do(method, path string, body any, headers ...string) *http.Response {
	s.t.Helper()
	return Request(s.t, method, s.URL+path, body, headers...)
}

// Request sends a request to url with an optional JSON body (a string or
// []byte is sent as is) and header name/value pairs, failing t when it
// cannot be sent. Server.Do is Request on the server's URL; tests of other
// set-ups (several gateways) call it with their own.
func Request(t testing.TB, method, url string, body any, headers ...string) *http.Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// JSON sends a request and decodes the JSON response into out (if not
// nil), returning the status.
func (s *Server) JSON(method, path string, body, out any, headers ...string) int {
	s.t.Helper()
	resp := s.Do(method, path, body, headers...)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// Event is one parsed SSE event.
type Event struct {
	ID   uint64
	Name string
	Data json.RawMessage
}

// Decode unmarshals the event's data.
func (e Event) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(e.Data, v); err != nil {
		t.Fatalf("event %s: decode %s: %v", e.Name, e.Data, err)
	}
}

// Content returns data.content of a token/step event.
func (e Event) Content() string {
	var d struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Content
}

// Stream is an open event stream.
type Stream struct {
	Resp *http.Response
	r    *bufio.Reader
}

// Chat posts to /api/chat and returns the open stream; it fails the test
// unless the response is an event stream.
func (s *Server) Chat(body any, headers ...string) *Stream {
	s.t.Helper()
	resp := s.Do(http.MethodPost, "/api/chat", body, headers...)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.t.Fatalf("chat: status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return &Stream{Resp: resp, r: bufio.NewReader(resp.Body)}
}

// NewStream wraps an event-stream response.
func NewStream(resp *http.Response) *Stream {
	return &Stream{Resp: resp, r: bufio.NewReader(resp.Body)}
}

// Next reads the next event (comments are skipped); io.EOF at the end.
func (st *Stream) Next() (Event, error) {
	var ev Event
	for {
		line, err := st.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.Name != "" || ev.Data != nil {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.ID, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			ev.Name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(line[6:])
		}
	}
}

// All reads events until the stream ends and closes it.
func (st *Stream) All(t testing.TB) []Event {
	t.Helper()
	defer st.Resp.Body.Close()
	var out []Event
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		out = append(out, ev)
	}
}

// Until reads events until the first one named one of names (returned
// last, with every event before it) and fails the test if the stream ends
// first.
func (st *Stream) Until(t testing.TB, names ...string) []Event {
	t.Helper()
	var out []Event
	for {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before %v (%v); events: %v", names, err, Names(out))
		}
		out = append(out, ev)
		if slices.Contains(names, ev.Name) {
			return out
		}
	}
}

// Close drops the connection.
func (st *Stream) Close() { st.Resp.Body.Close() }

// Steps is the text of the step events.
func Steps(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Name == "step" {
			out = append(out, e.Content())
		}
	}
	return out
}

// Names lists the event names.
func Names(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Name
	}
	return out
}

// Text concatenates the content of every token event.
func Text(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Name == "token" {
			b.WriteString(e.Content())
		}
	}
	return b.String()
}

// Coalesced merges consecutive token events into one (contents joined, the
// last one's id), which is how a gateway may deliver tokens to a client
// that lags or replays. Two streams of one turn are equal when their
// Coalesced forms are.
func Coalesced(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		if n := len(out); n > 0 && e.Name == "token" && out[n-1].Name == "token" {
			joined, _ := json.Marshal(map[string]string{"content": out[n-1].Content() + e.Content()})
			out[n-1] = Event{ID: e.ID, Name: "token", Data: joined}
			continue
		}
		out = append(out, e)
	}
	return out
}

// Operate sends one request as a trusted bus client (the operator CLI does
// the same) and fails the test on an error.
func Operate[Req, Rep any](t testing.TB, nc *nats.Conn, ep protocol.Endpoint[Req, Rep], req Req) Rep {
	t.Helper()
	rep, err := bus.Call(context.Background(), nc, ep, req)
	if err != nil {
		t.Fatalf("%s: %v", ep.Subject, err)
	}
	return rep
}

// Resend delivers req to ep as a later send of bus.CallResending does
// (marked with bus.ResendHeader): a copy of a request whose first delivery
// may have been handled, even finished, already. It returns the handler's
// answer.
func Resend[Req, Rep any](t testing.TB, nc *nats.Conn, ep protocol.Endpoint[Req, Rep], req Req) (Rep, error) {
	t.Helper()
	var rep Rep
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: ep.Subject, Data: body, Header: nats.Header{}}
	msg.Header.Set(bus.ResendHeader, "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := bus.RequestMsg(ctx, nc, msg)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(reply.Data, &rep); err != nil {
		t.Fatalf("%s: decode reply: %v", ep.Subject, err)
	}
	return rep, nil
}
