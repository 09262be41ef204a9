// Package distributed holds black-box tests of Waggle as a distributed
// system: real OS processes of the waggle binary on loopback — one process
// with the session store, approval and command services whose embedded
// NATS server everyone uses, two gateways and three turn runners — each
// runner with its own scripted model server, so a test knows which runner
// serves which turn.
package distributed

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// waggleBin is the binary under test, built once by TestMain.
var waggleBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself
	}
	os.Exit(waggletest.RunWithBinary(m, &waggleBin))
}

const runners = 3

// model is the scripted model behind every runner: runner i talks to
// llm[i], and every request is recorded with the runner that sent it.
type model struct {
	llm [runners]*llmtest.Server

	mu     sync.Mutex
	script func(runner int, r *llmtest.Request) llmtest.Response
	calls  []modelCall
	notify chan struct{}
}

type modelCall struct {
	runner int
	req    *llmtest.Request
}

func (m *model) handle(runner int, r *llmtest.Request) llmtest.Response {
	m.mu.Lock()
	m.calls = append(m.calls, modelCall{runner, r})
	script := m.script
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
	if script == nil {
		return llmtest.Reply("ok")
	}
	return script(runner, r)
}

// set replaces the script the model answers with.
func (m *model) set(script func(runner int, r *llmtest.Request) llmtest.Response) {
	m.mu.Lock()
	m.script = script
	m.mu.Unlock()
}

// Calls returns the model requests so far.
func (m *model) Calls() []modelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]modelCall(nil), m.calls...)
}

// waitCalls waits until pred holds for the recorded calls.
func (m *model) waitCalls(t *testing.T, what string, timeout time.Duration, pred func([]modelCall) bool) []modelCall {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if calls := m.Calls(); pred(calls) {
			return calls
		}
		select {
		case <-m.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; model calls: %v", what, describeCalls(m.Calls()))
		}
	}
}

func describeCalls(calls []modelCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = fmt.Sprintf("runner %d: %q (%d messages)", c.runner, lastUser(c.req), len(c.req.Chat.Messages))
	}
	return out
}

// lastUser is the text of the first user message of the turn being
// answered: the last user message that is not a continuation note.
func lastUser(r *llmtest.Request) string {
	for i := len(r.Chat.Messages) - 1; i >= 0; i-- {
		m := r.Chat.Messages[i]
		if m.Role == "user" && !strings.HasPrefix(m.Content, "[The reply above was cut off") {
			return m.Content
		}
	}
	return ""
}

// toolResults counts the tool messages of a request after its last user message.
func toolResults(r *llmtest.Request) int {
	n := 0
	for i := len(r.Chat.Messages) - 1; i >= 0; i-- {
		m := r.Chat.Messages[i]
		if m.Role == "user" && !strings.HasPrefix(m.Content, "[The reply above was cut off") {
			break
		}
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

// cluster is one distributed Waggle on loopback.
type cluster struct {
	t        *testing.T
	dir      string
	data     string // the data dir every process shares
	natsURL  string
	natsAuth []string // the flags that authenticate to natsURL
	model    *model
	services *waggletest.Proc
	gateways []*waggletest.Proc
	runners  []*waggletest.Proc
	nats     *natsProc // with clusterOpts.externalNATS
	restarts int       // how many times restart ran
}

type clusterOpts struct {
	grace    string // --disconnect-grace of the runners
	shutdown string // --shutdown-timeout of the runners
	config   string // config.json of the data dir, when set
	// externalNATS runs NATS as its own process (`waggle nats`) that the
	// test can stop and start, instead of embedded in the services process.
	externalNATS bool
}

// startCluster starts the services process, 3 runners and 2 gateways.
func startCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process tests are skipped in -short mode")
	}
	if o.grace == "" {
		o.grace = "30s"
	}
	if o.shutdown == "" {
		o.shutdown = "10s"
	}
	c := &cluster{t: t, dir: t.TempDir(), model: &model{notify: make(chan struct{}, 1)}}
	var pauses []*llmtest.Pause
	c.t.Cleanup(func() {
		for _, p := range pauses {
			p.Release()
		}
	})
	for i := range runners {
		i := i
		srv := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response { return c.model.handle(i, r) }))
		srv.Start()
		c.model.llm[i] = srv
		t.Cleanup(srv.Close)
	}
	natsAddr := waggletest.FreeAddr(t)
	c.natsURL = "nats://" + natsAddr
	c.data = filepath.Join(c.dir, "data")
	data := c.data
	if o.config != "" {
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(o.config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--log-format", "text", "--log-level", "debug", "--echo-delay", "1ms"}
	natsArgs := []string{"--nats-listen", natsAddr}
	// The embedded listener of the services process wants the credentials
	// it makes in the (shared) data dir at its start; `waggle nats` makes
	// them in its store dir.
	c.natsAuth = []string{"--nats-nkey", filepath.Join(data, embednats.CredentialsFileName)}
	if o.externalNATS {
		c.nats = c.startNATS(natsAddr)
		c.natsAuth = []string{"--nats-nkey", c.nats.nkey()}
		natsArgs = append([]string{"--nats-url", c.natsURL}, c.natsAuth...)
	}
	c.services = c.start("services", "", append(append([]string{"--targets=session-store,approval,command",
		"--llm-url", c.model.llm[0].URL()}, natsArgs...), common...)...)
	for i := range runners {
		c.runners = append(c.runners, c.start(fmt.Sprintf("runner-%d", i), "", append(append([]string{"--targets=turn-runner", "--nats-url", c.natsURL,
			"--llm-url", c.model.llm[i].URL(), "--disconnect-grace", o.grace, "--shutdown-timeout", o.shutdown}, c.natsAuth...), common...)...))
	}
	for i := range 2 {
		c.gateways = append(c.gateways, c.start(fmt.Sprintf("gateway-%d", i), "gateway", append(append([]string{"--targets=gateway", "--nats-url", c.natsURL,
			"--llm-url", c.model.llm[0].URL()}, c.natsAuth...), common...)...))
	}
	return c
}

// start runs one process on the cluster's data dir and waits for its
// /health. kind "gateway" serves HTTP on --addr; the others on
// --metrics-addr. A failed test logs the tail of its output.
func (c *cluster) start(name, kind string, args ...string) *waggletest.Proc {
	c.t.Helper()
	addr := waggletest.FreeAddr(c.t)
	if kind != "gateway" {
		args = append(args, "--metrics-addr", addr)
	}
	p := waggletest.StartProc(c.t, waggleBin, waggletest.ProcName(name), waggletest.ProcAddr(addr),
		waggletest.ProcDataDir(c.data), waggletest.ProcKillAtCleanup(), waggletest.ProcArgs(args...))
	c.t.Cleanup(func() {
		if c.t.Failed() {
			out := p.Output()
			if len(out) > 6000 {
				out = out[len(out)-6000:]
			}
			c.t.Logf("--- %s output (tail) ---\n%s", name, out)
		}
	})
	return p
}

// pause returns a pause released when the test ends.
func (c *cluster) pause() *llmtest.Pause {
	p := llmtest.NewPause()
	c.t.Cleanup(p.Release)
	return p
}

// do sends a request to a gateway with an optional JSON body.
func (c *cluster) do(gw int, method, path string, body any, headers ...string) *http.Response {
	c.t.Helper()
	return waggletest.Request(c.t, method, c.gateways[gw].URL+path, body, headers...)
}

// json sends a request and decodes the JSON answer into out.
func (c *cluster) json(gw int, method, path string, body, out any) int {
	c.t.Helper()
	resp := c.do(gw, method, path, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// chat posts a chat message on gateway gw and returns the open stream.
func (c *cluster) chat(gw int, body map[string]any) *waggletest.Stream {
	c.t.Helper()
	resp := c.do(gw, http.MethodPost, "/api/chat", body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("chat on gateway %d: status %d: %s", gw, resp.StatusCode, data)
	}
	return waggletest.NewStream(resp)
}

// follow opens GET /api/chat/turns/{id}/events on gateway gw.
func (c *cluster) follow(gw int, turnID string, headers ...string) *waggletest.Stream {
	c.t.Helper()
	resp := c.do(gw, http.MethodGet, "/api/chat/turns/"+turnID+"/events", nil, headers...)
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("follow %s on gateway %d: status %d: %s", turnID, gw, resp.StatusCode, data)
	}
	return waggletest.NewStream(resp)
}

// history reads a session's history.
func (c *cluster) history(session string) []histMsg {
	c.t.Helper()
	var h struct{ Messages []histMsg }
	if st := c.json(0, http.MethodGet, "/api/history?workspace=default&session="+session, nil, &h); st != http.StatusOK {
		c.t.Fatalf("history: status %d", st)
	}
	return h.Messages
}

type histMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// metric reads one sample of a runner's /metrics (0 when absent).
func (c *cluster) metric(p *waggletest.Proc, name string) float64 {
	c.t.Helper()
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		c.t.Fatalf("metrics of %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// readUntil reads events from st until pred accepts one (inclusive).
func readUntil(t *testing.T, st *waggletest.Stream, what string, pred func(waggletest.Event) bool) []waggletest.Event {
	t.Helper()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before %s (%v); got %v", what, err, waggletest.Names(out))
		}
		out = append(out, ev)
		if pred(ev) {
			return out
		}
	}
}

func named(name string) func(waggletest.Event) bool {
	return func(e waggletest.Event) bool { return e.Name == name }
}

func last(evs []waggletest.Event) waggletest.Event {
	if len(evs) == 0 {
		return waggletest.Event{}
	}
	return evs[len(evs)-1]
}

// allWithin reads the rest of st, failing if it takes longer than d.
func allWithin(t *testing.T, st *waggletest.Stream, d time.Duration) []waggletest.Event {
	t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(d, func() { st.Close() })
	defer timer.Stop()
	var out []waggletest.Event
	go func() {
		defer close(done)
		for {
			ev, err := st.Next()
			if err != nil {
				return
			}
			out = append(out, ev)
		}
	}()
	<-done
	if n := len(out); n == 0 || (out[n-1].Name != "done" && out[n-1].Name != "error") {
		t.Fatalf("stream did not end within %s: %v", d, waggletest.Names(out))
	}
	return out
}
