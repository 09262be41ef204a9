package benchsuite

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
)

// Stub is the model server of the benchmark: a libs/llmtest server whose
// answer is chosen by a directive in the last user message, so the server
// under test and the direct baseline get byte-identical streams.
//
//	wb fast N         N deltas "tok " back to back (llmtest fast mode)
//	wb fast N TAG     the same, counted under TAG when the stream ends
//	wb hold N I       wait at the current hold point, then N deltas I apart
//	wb pace N I       N deltas I apart, no hold
//
// Anything else is answered with five fast deltas.
type Stub struct {
	srv *llmtest.Server

	mu    sync.Mutex
	pause *llmtest.Pause
	// held counts hold requests that reached the stub.
	held atomic.Int64
	// ended counts tagged fast streams whose request finished, by tag.
	ended map[string]*atomic.Int64
}

// StartStub starts a stub on a random loopback port.
func StartStub() *Stub {
	s := &Stub{pause: llmtest.NewPause(), ended: map[string]*atomic.Int64{}}
	s.srv = llmtest.New(llmtest.WithHandler(s.respond))
	s.srv.Start()
	return s
}

// URL is the OpenAI base URL (…/v1).
func (s *Stub) URL() string { return s.srv.URL() }

// Close stops the stub and cuts its open streams.
func (s *Stub) Close() {
	s.Release()
	s.srv.Close()
}

// Release lets every stream waiting at the hold point go on, and arms a
// new hold point for streams that start later.
func (s *Stub) Release() {
	s.mu.Lock()
	p := s.pause
	s.pause = llmtest.NewPause()
	s.mu.Unlock()
	p.Release()
}

// Ended is how many fast streams tagged tag have finished (the whole
// answer written, or the client gone).
func (s *Stub) Ended(tag string) int64 {
	s.mu.Lock()
	c := s.ended[tag]
	s.mu.Unlock()
	if c == nil {
		return 0
	}
	return c.Load()
}

// watch counts r under tag once its request is finished. The goroutine
// ends with the request, and every request ends when the stub closes.
func (s *Stub) watch(r *llmtest.Request, tag string) {
	s.mu.Lock()
	c := s.ended[tag]
	if c == nil {
		c = &atomic.Int64{}
		s.ended[tag] = c
	}
	s.mu.Unlock()
	go func() {
		<-r.Done()
		c.Add(1)
	}()
}

// TaggedFastMessage is the directive for n back-to-back tokens counted
// under tag by Ended.
func TaggedFastMessage(n int, tag string) string { return fmt.Sprintf("wb fast %d %s", n, tag) }

// PaceMessage is the directive for n tokens interval apart, no hold.
func PaceMessage(n int, interval time.Duration) string {
	return fmt.Sprintf("wb pace %d %s", n, interval)
}

// FastMessage is the directive for n back-to-back tokens.
func FastMessage(n int) string { return fmt.Sprintf("wb fast %d", n) }

// HoldMessage is the directive for n tokens interval apart after the hold.
func HoldMessage(n int, interval time.Duration) string {
	return fmt.Sprintf("wb hold %d %s", n, interval)
}

func (s *Stub) respond(r *llmtest.Request) llmtest.Response {
	var last string
	for _, m := range r.Chat.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	f := strings.Fields(last)
	if len(f) >= 3 && f[0] == "wb" {
		n, err := strconv.Atoi(f[2])
		if err == nil && n > 0 {
			switch {
			case f[1] == "fast":
				if len(f) == 4 {
					s.watch(r, f[3])
				}
				return llmtest.Response{Steps: []llmtest.Step{llmtest.Fast(n, "tok ")}}
			case f[1] == "pace" && len(f) == 4:
				if d, err := time.ParseDuration(f[3]); err == nil {
					return llmtest.Response{Steps: spaced(nil, n, d)}
				}
			case f[1] == "hold" && len(f) == 4:
				if d, err := time.ParseDuration(f[3]); err == nil {
					s.mu.Lock()
					p := s.pause
					s.mu.Unlock()
					s.held.Add(1)
					return llmtest.Response{Steps: spaced([]llmtest.Step{llmtest.Wait(p)}, n, d)}
				}
			}
		}
	}
	return llmtest.Response{Steps: []llmtest.Step{llmtest.Fast(5, "tok ")}}
}

// spaced appends n deltas "tok ", d apart, to steps.
func spaced(steps []llmtest.Step, n int, d time.Duration) []llmtest.Step {
	for i := range n {
		if i > 0 {
			steps = append(steps, llmtest.Delay(d))
		}
		steps = append(steps, llmtest.Content("tok "))
	}
	return steps
}
