package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestSlowLeaseWritesDelayAStartNeverRefuseIt: the runner's lease writes
// take 5.5 s each (a lease bucket whose fsynced writes queue up behind a
// burst of starts: issue 23's stalled-readers run, where 20 of 20 chats
// beside 200 others got 503 BUS_UNAVAILABLE or 409 TURN_EXISTS), while
// the gateway sends the start again every few hundred milliseconds. The
// client waits longer and gets its turn, once: 200, the reply, done; the
// history holds one question and one answer.
func TestSlowLeaseWritesDelayAStartNeverRefuseIt(t *testing.T) {
	hub := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) {
		c.NATSListen = waggletest.FreeAddr(t)
		c.Targets = []string{app.TargetGateway, app.TargetSessionStore, app.TargetApproval, app.TargetCommand}
		c.Gateway.StartResendAfter = 300 * time.Millisecond
	}))
	slow := startSlowKV(t, strings.TrimPrefix(hub.App.NATSURL(), "nats://"), ownership.BucketLeases, 5500*time.Millisecond)
	waggletest.Start(t, waggletest.WithNATSOf(hub), waggletest.WithConfig(func(c *appConfig) {
		c.NATSURL = "nats://" + slow.addr
		c.Targets = []string{app.TargetTurnRunner}
	}))

	st := hub.Chat(map[string]any{"message": "wait for me", "session": "slow-lease"})
	defer st.Close()
	if st.Resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(st.Resp.Body)
		t.Fatalf("the chat answered %d %s; want 200 after a slower start", st.Resp.StatusCode, body)
	}
	evs := st.All(t)
	if n := len(evs); n == 0 || evs[n-1].Name != "done" {
		t.Fatalf("the turn ended with %v", waggletest.Names(evs))
	}
	if slow.delayed() == 0 {
		t.Fatal("no lease write went through the slow bucket: the test tests nothing")
	}
	var hist struct {
		Messages []struct{ Role, Content string }
	}
	if code := hub.JSON(http.MethodGet, "/api/history?workspace=default&session=slow-lease", nil, &hist); code != http.StatusOK {
		t.Fatalf("history: %d", code)
	}
	if len(hist.Messages) != 2 || hist.Messages[0].Content != "wait for me" {
		t.Errorf("history: %+v; want the question once and its answer", hist.Messages)
	}
}

// slowKV is a TCP proxy in front of a NATS server that delivers a
// client's writes to one key-value bucket late: each reaches the server
// delay after the client sent it, in the order they were sent; everything
// else passes at once. It plays a bucket whose writes queue up on a
// loaded server while the rest of the bus is quick.
type slowKV struct {
	addr    string
	prefix  string // the bucket's subjects: "$KV.<bucket>."
	delay   time.Duration
	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
	held    int // writes delayed so far
	closing bool
	done    chan struct{} // closed by close: late writes are dropped
}

func startSlowKV(t *testing.T, upstream, bucket string, delay time.Duration) *slowKV {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowKV{addr: ln.Addr().String(), prefix: "$KV." + bucket + ".", delay: delay, ln: ln, done: make(chan struct{})}
	p.wg.Go(func() { p.accept(upstream) })
	t.Cleanup(p.close) // registered before the runner: runs after its Stop
	return p
}

func (p *slowKV) delayed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *slowKV) close() {
	p.mu.Lock()
	p.closing = true
	conns := p.conns
	p.mu.Unlock()
	close(p.done)
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// track registers c to be closed with the proxy; false when it is closing.
func (p *slowKV) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *slowKV) accept(upstream string) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", upstream)
		if err != nil || !p.track(client) || !p.track(server) {
			_ = client.Close()
			if server != nil {
				_ = server.Close()
			}
			continue
		}
		p.wg.Go(func() {
			_, _ = io.Copy(client, server)
			_ = client.Close()
		})
		p.wg.Go(func() {
			p.forward(client, server)
			_ = server.Close()
		})
	}
}

// lateFrame is a write on its way to the server.
type lateFrame struct {
	due   time.Time
	frame []byte
}

// forward copies the client's protocol frames to the server, each write
// to the bucket delay late (through a queue that keeps their order).
func (p *slowKV) forward(client, server net.Conn) {
	var wmu sync.Mutex
	write := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := server.Write(b)
		return err
	}
	late := make(chan lateFrame, 4096)
	var lateDone sync.WaitGroup
	lateDone.Go(func() {
		for f := range late {
			// The bucket's slowness itself, not a synchronisation.
			wait := time.NewTimer(time.Until(f.due))
			select {
			case <-p.done:
				wait.Stop()
				return
			case <-wait.C:
			}
			if write(f.frame) != nil {
				return
			}
		}
	})
	defer func() { close(late); lateDone.Wait() }()
	r := bufio.NewReaderSize(client, 64<<10)
	for {
		frame, subject, err := readFrame(r)
		if err != nil {
			return
		}
		if strings.HasPrefix(subject, p.prefix) {
			p.mu.Lock()
			p.held++
			p.mu.Unlock()
			select {
			case late <- lateFrame{due: time.Now().Add(p.delay), frame: frame}:
			case <-p.done:
				return
			}
			continue
		}
		if write(frame) != nil {
			return
		}
	}
}

// readFrame reads one client protocol operation (its line, and for PUB
// and HPUB its payload); subject is a publish's subject.
func readFrame(r *bufio.Reader) (frame []byte, subject string, err error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, "", err
	}
	f := strings.Fields(string(bytes.TrimSpace(line)))
	if len(f) == 0 {
		return line, "", nil
	}
	var size int
	switch op := strings.ToUpper(f[0]); {
	case op == "PUB" && (len(f) == 3 || len(f) == 4), op == "HPUB" && (len(f) == 4 || len(f) == 5):
		if size, err = strconv.Atoi(f[len(f)-1]); err != nil {
			return nil, "", fmt.Errorf("slowkv: bad %s line %q", op, line)
		}
		subject = f[1]
	case op == "PUB", op == "HPUB":
		return nil, "", errors.New("slowkv: bad publish line")
	default:
		return line, "", nil
	}
	body := make([]byte, size+2) // the payload and its CRLF
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, "", err
	}
	return append(line, body...), subject, nil
}

// TestOwnTurnIsNeverTheClientsConflict: the only runner answers a chat's
// start TURN_EXISTS (a send of this very start made the turn and its
// answer was lost). The gateway picked the turn id, so the client did
// nothing wrong: it is told to try again (503 BUS_UNAVAILABLE), never 409
// TURN_EXISTS.
func TestOwnTurnIsNeverTheClientsConflict(t *testing.T) {
	hub := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) {
		c.NATSListen = waggletest.FreeAddr(t)
		c.Targets = []string{app.TargetGateway, app.TargetSessionStore, app.TargetApproval, app.TargetCommand}
	}))
	nc := hub.DialNATS()
	body, _ := json.Marshal(protocol.ErrTurnExists)
	sub, err := nc.Subscribe(protocol.StartTurn.Subject, func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Subject: m.Reply, Data: body, Header: nats.Header{
			micro.ErrorHeader: {protocol.ErrTurnExists.Message}, micro.ErrorCodeHeader: {protocol.ErrTurnExists.Kind.String()},
		}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var e struct{ Error, Code string }
	code := hub.JSON(http.MethodPost, "/api/chat", map[string]any{"message": "hello", "session": "own"}, &e)
	if code != http.StatusServiceUnavailable || e.Code != protocol.ErrBusUnavailable.Code {
		t.Fatalf("the chat answered %d %+v; want 503 %s, never 409 for the gateway's own turn id", code, e, protocol.ErrBusUnavailable.Code)
	}
}
