// Package queue holds the black-box load test of the session queue: many
// chats sent at once into one session all run, one at a time, in the order
// the server accepted them — with one runner and with three runner
// processes, on JSONL and on PostgreSQL.
package queue

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/waitfor"
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

// burst is how many chats go into the session at once.
const burst = 200

// turnDeadline bounds the whole burst: generous, for a loaded 2-core
// machine running the race detector elsewhere.
const turnDeadline = 3 * time.Minute

// TestBurstIntoOneSessionOneRunner: one `waggle serve` (every service, one
// turn runner), JSONL store.
func TestBurstIntoOneSessionOneRunner(t *testing.T) {
	queueBurst(t, queueStart(t, 1, nil))
}

// TestBurstIntoOneSessionThreeRunners: the same through three turn-runner
// processes on one NATS.
func TestBurstIntoOneSessionThreeRunners(t *testing.T) {
	queueBurst(t, queueStart(t, 3, nil))
}

// TestBurstIntoOneSessionOneRunnerPostgres: one runner, everything stored
// in PostgreSQL.
func TestBurstIntoOneSessionOneRunnerPostgres(t *testing.T) {
	queueBurst(t, queueStart(t, 1, queuePostgres(t)))
}

// TestBurstIntoOneSessionThreeRunnersPostgres: three runners, PostgreSQL.
func TestBurstIntoOneSessionThreeRunnersPostgres(t *testing.T) {
	queueBurst(t, queueStart(t, 3, queuePostgres(t)))
}

func queuePostgres(t *testing.T) []string {
	if testing.Short() {
		t.Skip("multi-process tests are skipped in -short mode")
	}
	return []string{"--store", "postgres", "--postgres-url", pgtest.URL(t)}
}

// queueServer is the process under test (gateway, store and one runner)
// and the extra runner processes.
type queueServer struct {
	main *waggletest.Proc
}

// queueStart runs one `waggle serve` with every service and, for more than
// one runner, its embedded NATS listening on loopback and runners-1 more
// processes that run only a turn runner on that NATS. Echo mode: no model
// server answers.
func queueStart(t *testing.T, runners int, storeArgs []string) *queueServer {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process tests are skipped in -short mode")
	}
	args := append([]string{"--echo-delay", "1ms", "--log-format", "text"}, storeArgs...)
	if runners == 1 {
		// The desktop: NATS is the process's own (the coordination state
		// is written without an fsync; the store records the turns).
		return &queueServer{main: waggletest.StartProc(t, waggleBin, waggletest.ProcArgs(args...))}
	}
	natsAddr := waggletest.FreeAddr(t)
	args = append([]string{"--nats-listen", natsAddr}, args...)
	main := waggletest.StartProc(t, waggleBin, waggletest.ProcArgs(args...))
	// A listener that wants credentials made them in the main process's
	// data dir at its start; the runners present them.
	natsArgs := []string{"--nats-url", "nats://" + natsAddr}
	if key := filepath.Join(main.DataDir, "nats.nk"); fileExists(key) {
		natsArgs = append(natsArgs, "--nats-nkey", key)
	}
	for i := 1; i < runners; i++ {
		queueRunner(t, fmt.Sprintf("runner-%d", i), append(natsArgs, storeArgs...))
	}
	return &queueServer{main: main}
}

// queueRunner starts a process that runs only a turn runner and waits for
// its /health (on its metrics listener).
func queueRunner(t *testing.T, name string, extra []string) {
	t.Helper()
	addr := waggletest.FreeAddr(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--targets=turn-runner", "--data-dir", filepath.Join(dir, "data"),
		"--metrics-addr", addr, "--echo-delay", "1ms", "--llm-url", "http://127.0.0.1:9/v1", "--log-format", "text"}, extra...)
	cmd := exec.Command(waggleBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("--- %s log (tail) ---\n%s", name, b)
		}
	})
	waitfor.Within(60*time.Second).Every(50*time.Millisecond).NoError(t, name+" healthy", func() error {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited while starting:\n%s", name, b)
		default:
		}
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// queueChat is one chat of the burst, as the client saw it.
type queueChat struct {
	msg    string
	turnID string
	// sent and accepted are ticks of one logical clock: before the request
	// was written, and once its answer's headers (with X-Waggle-Turn-Id)
	// arrived.
	sent, accepted, ended int64
	status                int
	body                  string // a refused chat's answer
	last                  string // the stream's last event
	err                   error
}

// queueBurst sends burst chats at once into one session and checks that
// every one ends in done, that history holds each exchange whole (user
// then assistant, never interleaved), 2×burst messages, and that a chat
// accepted before another was sent comes before it.
func queueBurst(t *testing.T, srv *queueServer) {
	const session = "burst"
	var clock atomic.Int64
	client := &http.Client{Timeout: turnDeadline, Transport: &http.Transport{MaxIdleConnsPerHost: burst}}
	chats := make([]*queueChat, burst)
	// accepted[i] is closed once chat i's answer arrived (or failed). Chat
	// i is sent once chat i-window was accepted: up to window chats race
	// to join at any moment, the acceptance order is observable (pairs of
	// chats where one was accepted before the other was sent), and every
	// chat is in flight together with the others — the first ones are
	// still queued when the last ones are sent.
	const window = 20
	accepted := make([]chan struct{}, burst)
	var wg sync.WaitGroup
	for i := range burst {
		chats[i] = &queueChat{msg: fmt.Sprintf("burst message %03d", i)}
		accepted[i] = make(chan struct{})
	}
	for i := range burst {
		wg.Go(func() {
			if i >= window {
				<-accepted[i-window]
			}
			queueSend(client, srv.main.URL, session, chats[i], &clock, accepted[i])
		})
	}
	wg.Wait()

	byMsg := map[string]*queueChat{}
	outcomes := map[string]int{}
	var failed []string
	for _, c := range chats {
		byMsg[c.msg] = c
		outcome := fmt.Sprintf("status %d, last event %q", c.status, c.last)
		outcomes[outcome]++
		if c.err != nil || c.status != http.StatusOK || c.last != "done" {
			failed = append(failed, fmt.Sprintf("%s: %s %s (err %v)", c.msg, outcome, strings.TrimSpace(c.body), c.err))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d chats did not end in done: %v; first: %v", len(failed), burst, outcomes, failed[:min(len(failed), 3)])
	}
	var h struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	resp := srv.main.Do(t, http.MethodGet, "/api/history?workspace=default&session="+session, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("history: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(h.Messages) != 2*burst {
		t.Fatalf("history holds %d messages, want %d", len(h.Messages), 2*burst)
	}
	var order []*queueChat
	for i := 0; i < len(h.Messages); i += 2 {
		u, a := h.Messages[i], h.Messages[i+1]
		c := byMsg[u.Content]
		if u.Role != "user" || c == nil || a.Role != "assistant" || !strings.Contains(a.Content, `"`+u.Content+`"`) {
			t.Fatalf("history %d-%d is not one exchange: %s %q / %s %q", i, i+1, u.Role, u.Content, a.Role, a.Content)
		}
		order = append(order, c)
		delete(byMsg, u.Content)
	}
	if len(byMsg) != 0 {
		t.Fatalf("%d chats are not in history", len(byMsg))
	}
	// Acceptance order: whatever was accepted before another chat was even
	// sent ran before it.
	pairs := 0
	for i, ran := range order {
		for _, after := range order[i+1:] {
			if after.accepted < ran.sent {
				t.Errorf("%s (turn %s) was accepted before %s (turn %s) was sent, but ran after it",
					after.msg, after.turnID, ran.msg, ran.turnID)
			}
			if ran.accepted < after.sent {
				pairs++
			}
		}
	}
	// How many chats were still open when the last one was sent (no
	// timing is asserted; the log says how much the queue held at once).
	inFlight := 0
	for _, c := range chats {
		if c.ended > chats[burst-1].sent {
			inFlight++
		}
	}
	if pairs == 0 {
		t.Fatal("no chat was accepted before another was sent: the order was not observable")
	}
	t.Logf("%d chats done in acceptance order (%d ordered pairs checked; %d still open when the last was sent)", burst, pairs, inFlight)
}

// queueSend posts one chat and reads its stream to the end. It runs on
// its own goroutine, so it records failures instead of failing the test.
func queueSend(client *http.Client, base, session string, c *queueChat, clock *atomic.Int64, accepted chan<- struct{}) {
	acceptOnce := sync.OnceFunc(func() { close(accepted) })
	defer acceptOnce()
	body, _ := json.Marshal(map[string]any{"message": c.msg, "session": session})
	req, err := http.NewRequest(http.MethodPost, base+"/api/chat", strings.NewReader(string(body)))
	if err != nil {
		c.err = err
		return
	}
	req.Header.Set("Content-Type", "application/json")
	c.sent = clock.Add(1)
	resp, err := client.Do(req)
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	c.accepted = clock.Add(1)
	acceptOnce()
	c.status = resp.StatusCode
	c.turnID = resp.Header.Get("X-Waggle-Turn-Id")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.body = string(b)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			c.last = name
		}
	}
	c.err = sc.Err()
	c.ended = clock.Add(1)
	if c.last != "done" && c.last != "error" && c.err == nil {
		c.err = io.ErrUnexpectedEOF
	}
}
