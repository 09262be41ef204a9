// Package load holds the black-box tests of the turn path under load: a
// slow bus, stalled readers and thousands of concurrent turns. They run the
// real app (embedded NATS, HTTP, SSE) and speak raw HTTP/1.1 on their own
// connections, so the client side costs one goroutine per stream and no
// client buffering hides what the server does.
package load

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// rawChat opens POST /api/chat on its own connection and returns the
// connection and a reader positioned after the response headers; a
// response other than a stream is reported with its status and body.
func rawChat(base, session, message string) (net.Conn, *bufio.Reader, error) {
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	body, _ := json.Marshal(map[string]string{"message": message, "session": session})
	fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		return nil, nil, fmt.Errorf("chat %s: status %d: %s", session, resp.StatusCode, b)
	}
	// The body is chunked; read it through the response so chunk framing
	// is handled, but keep the buffered reader small.
	return conn, bufio.NewReaderSize(resp.Body, 4096), nil
}

// streamResult is what a client read from one stream.
type streamResult struct {
	terminal string // done or error ("" if the stream ended without one)
	text     string // the token contents joined
	final    string // done's content, or error's message
	gaps     int    // stream_gap events
	events   int
	err      error
}

// readStream reads SSE events until the terminal event. Lines of any
// length are read whole (coalesced tokens can be long).
func readStream(br *bufio.Reader) streamResult {
	var res streamResult
	var text strings.Builder
	var name string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			res.err = err
			res.text = text.String()
			return res
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = line[7:]
			res.events++
		case strings.HasPrefix(line, "data: "):
			switch name {
			case "token":
				var d struct{ Content string }
				if err := json.Unmarshal([]byte(line[6:]), &d); err != nil {
					res.err = err
					return res
				}
				text.WriteString(d.Content)
			case "stream_gap":
				res.gaps++
			case "done", "error":
				var d struct{ Content, Message string }
				_ = json.Unmarshal([]byte(line[6:]), &d)
				res.terminal, res.final = name, d.Content+d.Message
				res.text = text.String()
				return res
			}
		}
	}
}

// skipUnderLoadTestLimits skips in -short mode and under the race detector
// (make test runs this package again without it).
func skipUnderLoadTestLimits(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("load test: not in -short mode")
	}
	if raceEnabled {
		t.Skip("load test: run without -race (make test's second pass)")
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// bigToken is one streamed delta of the stalled-reader test: long enough
// that a turn's stream is several times what the loopback socket buffers
// absorb, so a client that stops reading really stalls its relay.
var bigToken = strings.Repeat("x", 1999) + " "

// TestStalledReadersKeepMemoryBounded: clients that stop reading while
// their turns stream thousands of tokens cost the server a bounded amount
// of memory, not what they have not read; turns beside them finish
// normally; once they close, the memory is returned; and a stalled client
// that reads again after the stream's window moved on is told of the gap
// and still gets the full reply with done.
func TestStalledReadersKeepMemoryBounded(t *testing.T) {
	skipUnderLoadTestLimits(t)
	const (
		stalled     = 24
		normal      = 5
		tokens      = 2500
		streamBytes = 16 << 20
	)
	want := strings.Repeat(bigToken, tokens)
	model := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if lastUser(r) == "hi" {
			return llmtest.Reply("hello")
		}
		return llmtest.Response{Steps: []llmtest.Step{llmtest.Fast(tokens, bigToken)}}
	}))
	model.Start()
	t.Cleanup(model.Close)
	srv := waggletest.Start(t, waggletest.WithLLM(model.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.TurnStream.MaxBytes = streamBytes
	}))
	// Warm up (first-turn allocations are not what this test measures).
	warm, br, err := rawChat(srv.URL, "warm", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if res := readStream(br); res.terminal != "done" {
		t.Fatalf("warm-up turn: %+v", res)
	}
	warm.Close()
	base := heapInUse()

	conns := make([]net.Conn, 0, stalled)
	readers := make([]*bufio.Reader, 0, stalled)
	for i := range stalled {
		c, br, err := rawChat(srv.URL, fmt.Sprintf("stalled-%d", i), "long")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		readers = append(readers, br)
	}
	var wg sync.WaitGroup
	results := make([]streamResult, normal)
	for i := range normal {
		wg.Go(func() {
			c, br, err := rawChat(srv.URL, fmt.Sprintf("normal-%d", i), "long")
			if err != nil {
				results[i].err = err
				return
			}
			defer c.Close()
			results[i] = readStream(br)
		})
	}
	wg.Wait()
	for i, res := range results {
		// A reader that keeps up gets every token; one that fell behind the
		// window (a loaded machine) is told so and still gets the whole
		// reply with done — never a silent loss, never a failed turn.
		complete := res.text == want || res.gaps > 0 && strings.TrimSpace(res.final) == strings.TrimSpace(want)
		if res.terminal != "done" || !complete {
			t.Fatalf("normal turn %d beside stalled readers: terminal %q (%.80q), %d of %d bytes, %d gaps, err %v",
				i, res.terminal, res.final, len(res.text), len(want), res.gaps, res.err)
		}
		if res.gaps > 0 {
			t.Logf("normal turn %d fell behind the window (%d stream_gap events)", i, res.gaps)
		}
	}
	// Every stalled turn has finished on the server: its reply is stored.
	for i := range stalled {
		waitfor.Within(60*time.Second).True(t, "stalled turn stored", func() bool {
			var h struct {
				Messages []struct{ Role, Content string }
			}
			srv.JSON(http.MethodGet, fmt.Sprintf("/api/history?session=stalled-%d", i), nil, &h)
			return len(h.Messages) == 2 && h.Messages[1].Role == "assistant" && len(h.Messages[1].Content) >= len(want)-1
		})
	}
	unread := int64(stalled) * int64(len(want)) // what the stalled clients did not read
	grown := heapInUse() - base
	t.Logf("heap grew %d MiB with %d stalled readers holding %d MiB unread", grown>>20, stalled, unread>>20)
	// Bound: the stream's window (twice, for the store's overhead), plus
	// per stalled relay what it may hold — its live queue, the batch it is
	// writing with its coalesced copy, a few events of read-ahead (1.5 MiB
	// together), and the one event it may be stuck writing, at worst its
	// turn's done, which carries the whole reply — plus slack for the
	// runtime. The old server kept every event (its stream held 1 GiB for
	// 15 minutes, its live queues 4,096 events each): several times this.
	bound := int64(streamBytes)*2 + int64(stalled)*(int64(len(want))+3<<19) + 16<<20
	if grown > bound {
		t.Fatalf("heap grew %d MiB while %d readers stalled; bound %d MiB", grown>>20, stalled, bound>>20)
	}

	// One stalled reader reads again: the window has moved past what it
	// missed (the other turns' events pushed it out), so after what its
	// socket still held it is told of the gap — never silently truncated —
	// and its stream ends.
	res := readStream(readers[0])
	if res.gaps == 0 {
		t.Fatalf("a reader behind the kept window got no stream_gap event (terminal %q, %d events, %d of %d bytes of text, err %v)",
			res.terminal, res.events, len(res.text), len(want), res.err)
	}
	if res.terminal == "" && res.err != io.EOF && res.err != io.ErrUnexpectedEOF {
		t.Fatalf("after the gap the stream neither ended nor finished: %v", res.err)
	}
	for _, c := range conns {
		c.Close()
	}
	waitfor.Within(30*time.Second).True(t, "memory returned after the stalled readers closed", func() bool {
		return heapInUse()-base <= int64(streamBytes)*2+16<<20
	})
}

// lastUser is the last user message of a model request.
func lastUser(r *llmtest.Request) string {
	var last string
	for _, m := range r.Chat.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	return last
}

// TestTwoThousandConcurrentTurns: one process holds 2,000 streaming turns
// at once with the default admission limit; none is refused and every one
// ends in done with its full reply.
func TestTwoThousandConcurrentTurns(t *testing.T) {
	skipUnderLoadTestLimits(t)
	const turns = 2000
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.TurnRunner.EchoDelay = 20 * time.Millisecond
	}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	start := make(chan struct{})
	for i := range turns {
		wg.Go(func() {
			<-start
			c, br, err := rawChat(srv.URL, "s"+strconv.Itoa(i), "hello "+strconv.Itoa(i))
			if err != nil {
				mu.Lock()
				outcomes[err.Error()]++
				mu.Unlock()
				return
			}
			defer c.Close()
			res := readStream(br)
			ok := res.terminal == "done" && strings.Contains(res.text, `Your message: "hello `+strconv.Itoa(i)+`"`)
			mu.Lock()
			if ok {
				outcomes["done"]++
			} else {
				outcomes[fmt.Sprintf("terminal %q err %v", res.terminal, res.err)]++
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if outcomes["done"] != turns {
		t.Fatalf("outcomes of %d concurrent turns: %v", turns, outcomes)
	}
}

// throttle forwards TCP connections to target, slowing the client→target
// direction to about rate bytes per second: a congested link between a
// turn runner and NATS.
func throttle(t *testing.T, target string, rate int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go func() { _, _ = io.Copy(c, s) }()
			go func() {
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
						// The link's speed: this proxy is the slow bus.
						time.Sleep(time.Duration(n) * time.Second / time.Duration(rate))
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// TestSlowBusNeverFailsATurn: a turn runner whose link to NATS is slow
// (a congested network, a busy server) slows its turns down; it does not
// fail them. Every turn ends in done with its whole reply, in order.
func TestSlowBusNeverFailsATurn(t *testing.T) {
	skipUnderLoadTestLimits(t)
	const turns, tokens = 8, 3000
	model := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		return llmtest.FastReply(tokens)
	}))
	model.Start()
	t.Cleanup(model.Close)
	natsAddr := waggletest.FreeAddr(t)
	services := waggletest.Start(t, waggletest.WithLLM(model.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.Targets = []string{app.TargetGateway, app.TargetSessionStore, app.TargetApproval, app.TargetCommand}
		c.NATSListen = natsAddr
	}))
	waggletest.Start(t, waggletest.WithLLM(model.URL()), waggletest.WithDataDir(services.DataDir), waggletest.WithConfig(func(c *app.Config) {
		c.Targets = []string{app.TargetTurnRunner}
		c.NATSURL, c.NATSNkey = throttle(t, natsAddr, 400<<10), app.NATSCredentials(services.DataDir)
	}))
	want := strings.Repeat("tok ", tokens)
	results := make([]streamResult, turns)
	var wg sync.WaitGroup
	for i := range turns {
		wg.Go(func() {
			c, br, err := rawChat(services.URL, "slow-"+strconv.Itoa(i), "long")
			if err != nil {
				results[i].err = err
				return
			}
			defer c.Close()
			results[i] = readStream(br)
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.terminal != "done" || res.text != want {
			t.Errorf("turn %d over a slow bus: terminal %q (%.80q), %d of %d bytes, %d events, err %v", i, res.terminal, res.final, len(res.text), len(want), res.events, res.err)
		}
	}
}
