// Package cluster holds black-box tests of a team server on a real
// three-node NATS cluster: three `waggle nats --config` processes clustered
// on loopback (sync_interval: always, as deploy/nats), one process with the
// session store, approval and command services, two turn runners and two
// gateways, each a separate `waggle serve` with all three URLs and
// --nats-replicas 3. The tests kill nodes with SIGKILL (the leader of the
// turn stream, of the approvals bucket) or stop them with SIGTERM as a
// planned rolling restart does (every node in turn), restart them on their
// stores, and check what a user would notice.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// waggleBin is the binary under test, built once by TestMain.
var waggleBin string

// enableEnv turns the suite on. It takes minutes and ten processes, so
// `make test` leaves it to `make test-cluster` (which CI runs).
const enableEnv = "WAGGLE_TEST_CLUSTER"

// logsEnv names a directory where a test that measures pauses keeps every
// process's and node's log when set (to find what a pause waited for).
const logsEnv = "WAGGLE_TEST_CLUSTER_LOGS"

// metaLeader is the node the cluster's meta group is led by, as n's
// monitoring endpoint says ("" when it cannot say). It only informs logs.
func (h *harness) metaLeader(n *natsNode) string {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + n.monitor + "/jsz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if json.NewDecoder(resp.Body).Decode(&jsz) != nil {
		return ""
	}
	return jsz.Meta.Leader
}

// logStored logs what the turn stream holds of a turn: each event's
// sequence, number and message id, to tell a hole the stream has from one
// a reader made.
func (h *harness) logStored(js jetstream.JetStream, turnID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, protocol.StreamTurns, jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.TurnEvents(turnID)}})
	if err != nil {
		h.t.Logf("stored events of %s: %v", turnID, err)
		return
	}
	var lines []string
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			break
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, _ := m.Metadata()
			var seq uint64
			if md != nil {
				seq = md.Sequence.Stream
			}
			lines = append(lines, fmt.Sprintf("seq %d num %s %s id %s (%d bytes)", seq, m.Headers().Get(protocol.HeaderEventNum),
				m.Headers().Get(protocol.HeaderEvent), m.Headers().Get(jetstream.MsgIDHeader), len(m.Data())))
		}
		if n == 0 {
			break
		}
	}
	h.t.Logf("stored events of %s (%d):\n%s", turnID, len(lines), strings.Join(lines, "\n"))
}

// keepLogs copies every process's output and node's log into $logsEnv/<test>/.
func (h *harness) keepLogs() {
	root := os.Getenv(logsEnv)
	if root == "" {
		return
	}
	dir := filepath.Join(root, h.t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Logf("keep logs: %v", err)
		return
	}
	write := func(name, out string) {
		if err := os.WriteFile(filepath.Join(dir, name+".log"), []byte(out), 0o644); err != nil {
			h.t.Logf("keep logs: %v", err)
		}
	}
	for i, g := range h.gateways {
		write(fmt.Sprintf("gateway-%d", i), g.Output())
	}
	for i, r := range h.runners {
		write(fmt.Sprintf("runner-%d", i), r.Output())
	}
	write("services", h.services.Output())
	for _, n := range h.nodes {
		b, _ := os.ReadFile(n.proc.Log)
		write(n.name, string(b))
	}
	h.t.Logf("logs kept in %s", dir)
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || os.Getenv(enableEnv) == "" {
		os.Exit(m.Run()) // every test skips itself
	}
	os.Exit(waggletest.RunWithBinary(m, &waggleBin))
}

// nodes is the cluster's size.
const nodes = 3

// natsNode is one `waggle nats` process of the cluster, restartable on its
// store.
type natsNode struct {
	name    string
	client  string // host:port of clients
	monitor string // host:port of the monitoring endpoint
	route   string // host:port of cluster routes
	conf    string
	proc    *waggletest.NATSProc
}

// harness is one team server on a three-node cluster.
type harness struct {
	t     *testing.T
	dir   string
	nodes []*natsNode
	urls  string // every node's client URL, comma-separated
	llm   *llmtest.Server

	mu     sync.Mutex
	script func(*llmtest.Request) llmtest.Response

	services *waggletest.Proc
	runners  []*waggletest.Proc
	gateways []*waggletest.Proc
}

// boot says how startHarness starts the team server.
type boot int

const (
	// inWaves waits until JetStream is clustered, then starts the services
	// process, then the runners, then the gateways (as scripts/cluster.sh).
	inWaves boot = iota
	// allAtOnce starts every node and every process at the same moment,
	// as an orchestrator does: nobody waits for the cluster to form.
	allAtOnce
)

// startHarness starts the three nodes, waits until JetStream is clustered,
// then the services process, two runners and two gateways.
func startHarness(t *testing.T) *harness { return bootHarness(t, inWaves) }

// bootHarness starts the three nodes and the processes as how says; it
// returns when every process answers /health.
func bootHarness(t *testing.T, how boot) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster tests are skipped in -short mode")
	}
	if os.Getenv(enableEnv) == "" {
		t.Skip("the three-node cluster suite runs with " + enableEnv + "=1: make test-cluster")
	}
	h := &harness{t: t, dir: t.TempDir()}
	h.llm = llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		h.mu.Lock()
		script := h.script
		h.mu.Unlock()
		if script == nil {
			return llmtest.Reply("ok")
		}
		return script(r)
	}))
	h.llm.Start()
	t.Cleanup(h.llm.Close)

	for i := range nodes {
		n := &natsNode{
			name:    fmt.Sprintf("node-%d", i),
			client:  waggletest.FreeAddr(t),
			monitor: waggletest.FreeAddr(t),
			route:   waggletest.FreeAddr(t),
		}
		n.conf = filepath.Join(h.dir, n.name+".conf")
		h.nodes = append(h.nodes, n)
	}
	var urls []string
	for _, n := range h.nodes {
		h.writeConf(n)
		n.proc = waggletest.NewNATSProc(t, waggleBin, n.name, filepath.Join(h.dir, n.name+".log"), "--config", n.conf)
		urls = append(urls, "nats://"+n.client)
	}
	h.urls = strings.Join(urls, ",")
	for _, n := range h.nodes {
		n.proc.Start()
	}
	if how == inWaves {
		for _, n := range h.nodes {
			h.waitNode(n)
		}
	}

	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, g := range h.gateways {
			if g != nil {
				tail(t, fmt.Sprintf("gateway-%d", i), g.Output())
			}
		}
		for i, r := range h.runners {
			if r != nil {
				tail(t, fmt.Sprintf("runner-%d", i), r.Output())
			}
		}
		if h.services != nil {
			tail(t, "services", h.services.Output())
		}
	})
	data := filepath.Join(h.dir, "data")
	common := []string{"--nats-url", h.urls, "--nats-replicas", "3", "--llm-url", h.llm.URL(),
		"--log-format", "text", "--log-level", "debug"}
	var wg sync.WaitGroup
	services := func() {
		h.services = h.startRole("services", data, append([]string{"--targets=session-store,approval,command"}, common...))
	}
	h.runners = make([]*waggletest.Proc, 2)
	runners := func() {
		for i := range h.runners {
			wg.Go(func() {
				h.runners[i] = h.startRole(fmt.Sprintf("runner-%d", i), data, append([]string{"--targets=turn-runner", "--disconnect-grace", "60s"}, common...))
			})
		}
	}
	h.gateways = make([]*waggletest.Proc, 2)
	gateways := func() {
		for i := range h.gateways {
			wg.Go(func() {
				h.gateways[i] = waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(data),
					waggletest.ProcArgs(append([]string{"--targets=gateway"}, common...)...))
			})
		}
	}
	if how == allAtOnce {
		wg.Go(services)
		runners()
		gateways()
		wg.Wait()
	} else {
		// Waves: the services first (they create most buckets), then the
		// runners, then the gateways.
		services()
		runners()
		wg.Wait()
		if !t.Failed() {
			gateways()
			wg.Wait()
		}
	}
	if t.Failed() {
		t.FailNow() // a process did not start (StartProc said why)
	}
	return h
}

func tail(t *testing.T, name, out string) {
	if len(out) > 6000 {
		out = out[len(out)-6000:]
	}
	t.Logf("--- %s output (tail) ---\n%s", name, out)
}

// startRole starts a `waggle serve` without a gateway: its /health is on
// --metrics-addr, which StartProc waits for as the process's address.
func (h *harness) startRole(name, data string, args []string) *waggletest.Proc {
	addr := waggletest.FreeAddr(h.t)
	return waggletest.StartProc(h.t, waggleBin, waggletest.ProcAddr(addr), waggletest.ProcDataDir(data),
		waggletest.ProcArgs(append(args, "--metrics-addr", addr)...))
}

// writeConf writes a node's configuration: loopback only, its own store,
// every write fsynced before it is acknowledged (as deploy/nats).
func (h *harness) writeConf(n *natsNode) {
	var routes []string
	for _, o := range h.nodes {
		if o != n {
			routes = append(routes, "nats-route://"+o.route)
		}
	}
	conf := fmt.Sprintf(`server_name: %s
listen: %s
http: %s
max_payload: 8MB
jetstream {
  store_dir: %q
  max_memory_store: 512MB
  max_file_store: 2GB
  sync_interval: always
}
cluster {
  name: waggle-test
  listen: %s
  routes: [%s]
}
`, n.name, n.client, n.monitor, filepath.Join(h.dir, n.name+"-store"), n.route, strings.Join(routes, ", "))
	if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// waitNode waits until the node's JetStream is up and part of the
// cluster (its /healthz answers 200 once a meta leader is known and its
// assets are current).
func (h *harness) waitNode(n *natsNode) {
	h.t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	waitfor.Within(90*time.Second).Every(100*time.Millisecond).NoError(h.t, n.name+" healthy", func() error {
		if !n.proc.Alive() {
			b, _ := os.ReadFile(n.proc.Log)
			h.t.Fatalf("%s exited while starting:\n%s", n.name, b)
		}
		resp, err := client.Get("http://" + n.monitor + "/healthz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return nil
	})
}

// kill sends SIGKILL to the node and waits until it is gone.
func (h *harness) kill(n *natsNode) {
	h.t.Helper()
	n.proc.Kill()
	h.t.Logf("killed %s", n.name)
}

// stop sends SIGTERM to the node, as a planned restart (an upgrade, a
// config change) does, and waits until it is gone.
func (h *harness) stop(n *natsNode) {
	h.t.Helper()
	n.proc.Signal(syscall.SIGTERM)
	if err := n.proc.Wait(); err != nil {
		h.t.Errorf("%s stopped on SIGTERM with %v", n.name, err)
	}
	h.t.Logf("stopped %s", n.name)
}

// restart starts a killed node again on its store and waits for it.
func (h *harness) restart(n *natsNode) {
	h.t.Helper()
	n.proc.Start()
	h.waitNode(n)
}

// node returns the node named name.
func (h *harness) node(name string) *natsNode {
	h.t.Helper()
	for _, n := range h.nodes {
		if n.name == name {
			return n
		}
	}
	h.t.Fatalf("no node %q", name)
	return nil
}

// dial connects the test to the cluster as an operator's tool does.
func (h *harness) dial() jetstream.JetStream {
	h.t.Helper()
	nc, err := nats.Connect(h.urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatalf("dial the cluster: %v", err)
	}
	h.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		h.t.Fatal(err)
	}
	return js
}

// leader waits for stream's leader and returns its node.
func (h *harness) leader(js jetstream.JetStream, stream string) *natsNode {
	h.t.Helper()
	var name string
	waitfor.Within(60*time.Second).Every(200*time.Millisecond).NoError(h.t, "a leader of "+stream, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("no leader yet")
		}
		if len(info.Cluster.Replicas) != nodes-1 {
			return fmt.Errorf("replicated on %d nodes, want %d", len(info.Cluster.Replicas)+1, nodes)
		}
		name = info.Cluster.Leader
		return nil
	})
	return h.node(name)
}

// elected returns when stream has a leader other than old (or after
// d), and how long that took from since. It does not fail the test: it
// runs beside the test's own reads and only measures.
func elected(js jetstream.JetStream, stream, old string, since time.Time, d time.Duration) time.Duration {
	for time.Since(since) < d {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := js.Stream(ctx, stream)
		if err == nil {
			info, err := st.Info(ctx)
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != old {
				cancel()
				return time.Since(since)
			}
		}
		cancel()
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	return d
}

// waitCurrent waits until stream has a leader and every replica is
// current: the cluster is whole again.
func (h *harness) waitCurrent(js jetstream.JetStream, stream string) {
	h.t.Helper()
	waitfor.Within(90*time.Second).Every(200*time.Millisecond).NoError(h.t, stream+" whole again", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("no leader")
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		if len(info.Cluster.Replicas) != nodes-1 {
			return fmt.Errorf("%d replicas", len(info.Cluster.Replicas))
		}
		return nil
	})
}

// setScript sets what the model answers.
func (h *harness) setScript(fn func(*llmtest.Request) llmtest.Response) {
	h.mu.Lock()
	h.script = fn
	h.mu.Unlock()
}

// do sends a request to gateway gw.
func (h *harness) do(gw int, method, path string, body any) *http.Response {
	h.t.Helper()
	return h.gateways[gw].Do(h.t, method, path, body)
}

// post sends a JSON POST to gateway gw without failing the test: for
// goroutines beside it.
func (h *harness) post(gw int, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return http.Post(h.gateways[gw].URL+path, "application/json", bytes.NewReader(b))
}

// answer is a JSON response.
type answer struct {
	status int
	body   string
	code   string
}

// retryable reports whether a is what a client may see while the cluster
// elects: a 503 whose code says the bus could not answer for now (the
// request did nothing; try again).
func (a answer) retryable() bool {
	return a.status == http.StatusServiceUnavailable && (a.code == "BUS_UNAVAILABLE" || a.code == "BUS_TIMEOUT")
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, strings.TrimSpace(a.body)) }

// read reads a non-stream response.
func read(resp *http.Response) answer {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Code string }
	_ = json.Unmarshal(b, &e)
	return answer{status: resp.StatusCode, body: string(b), code: e.Code}
}

// chat starts a chat on gw, failing the test unless it streams.
func (h *harness) chat(gw int, body map[string]any) *waggletest.Stream {
	h.t.Helper()
	resp := h.do(gw, http.MethodPost, "/api/chat", body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		h.t.Fatalf("chat on gateway %d: %s", gw, read(resp))
	}
	return waggletest.NewStream(resp)
}

// history reads a session's history.
func (h *harness) history(gw int, session string) []histMsg {
	h.t.Helper()
	resp := h.do(gw, http.MethodGet, "/api/history?workspace=default&session="+session, nil)
	a := read(resp)
	if a.status != http.StatusOK {
		h.t.Fatalf("history of %s: %s", session, a)
	}
	var out struct{ Messages []histMsg }
	if err := json.Unmarshal([]byte(a.body), &out); err != nil {
		h.t.Fatalf("history of %s: %v", session, err)
	}
	return out.Messages
}

type histMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// timedEvent is an event with the time the client read it.
type timedEvent struct {
	waggletest.Event
	at time.Time
}

// collect reads st to its end (or for at most d), stamping each event
// with the time the client read it; it is an error when the stream does
// not end in done or error in time.
func collect(st *waggletest.Stream, d time.Duration, seen func(timedEvent)) ([]timedEvent, error) {
	timer := time.AfterFunc(d, st.Close)
	defer timer.Stop()
	var out []timedEvent
	for {
		ev, err := st.Next()
		if err != nil {
			if n := len(out); n == 0 || (out[n-1].Name != "done" && out[n-1].Name != "error") {
				return out, fmt.Errorf("stream ended without done or error within %s (%v); %d events, the last: %v", d, err, len(out), lastNames(out, 5))
			}
			return out, nil
		}
		te := timedEvent{ev, time.Now()}
		out = append(out, te)
		if seen != nil {
			seen(te)
		}
	}
}

func lastNames(evs []timedEvent, n int) []string {
	var out []string
	for _, e := range evs[max(0, len(evs)-n):] {
		out = append(out, e.Name+" "+string(e.Data))
	}
	return out
}

func events(evs []timedEvent) []waggletest.Event {
	out := make([]waggletest.Event, len(evs))
	for i, e := range evs {
		out[i] = e.Event
	}
	return out
}

// doneContent is the content of the stream's done event ("", and the
// test failed, when it did not end in done).
func doneContent(t *testing.T, evs []waggletest.Event) string {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
		t.Errorf("stream did not end in done: %v", tailNames(evs))
		return ""
	}
	var d struct{ Content string }
	evs[len(evs)-1].Decode(t, &d)
	return d.Content
}

func tailNames(evs []waggletest.Event) []string {
	var out []string
	for _, e := range evs[max(0, len(evs)-5):] {
		out = append(out, e.Name+" "+string(e.Data))
	}
	return out
}

// numbered is a reply of n tokens "w0001 " … that show any token lost,
// doubled or out of order.
func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%04d ", i+1)
	}
	return out
}

// slowReply streams pieces with delay between them.
func slowReply(pieces []string, delay time.Duration) llmtest.Response {
	steps := make([]llmtest.Step, 0, 2*len(pieces))
	for _, p := range pieces {
		steps = append(steps, llmtest.Content(p), llmtest.Delay(delay))
	}
	return llmtest.Response{Steps: steps}
}

// lastUser is the text of the last user message of a model request.
func lastUser(r *llmtest.Request) string {
	for i := len(r.Chat.Messages) - 1; i >= 0; i-- {
		if m := r.Chat.Messages[i]; m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// toolResults counts the tool messages after the last user message.
func toolResults(r *llmtest.Request) int {
	n := 0
	for i := len(r.Chat.Messages) - 1; i >= 0 && r.Chat.Messages[i].Role != "user"; i-- {
		if r.Chat.Messages[i].Role == "tool" {
			n++
		}
	}
	return n
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-30)
	return fmt.Sprintf("at byte %d of %d/%d: got …%q…, want …%q…", i, len(got), len(want), got[lo:min(len(got), i+30)], want[lo:min(len(want), i+30)])
}
