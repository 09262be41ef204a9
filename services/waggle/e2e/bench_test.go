package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

func benchServer(b *testing.B) *waggletest.Server {
	return waggletest.Start(b, waggletest.WithConfig(func(c *appConfig) { c.TurnRunner.EchoDelay = 0 }))
}

func postChat(b *testing.B, url string, i int) *http.Response {
	body := []byte(fmt.Sprintf(`{"message":"benchmark turn %d","session":"bench-%d"}`, i, i%64))
	resp, err := http.Post(url+"/api/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// BenchmarkEchoTurn is a whole echo-mode turn (echo delay 0): validation,
// runner request, two fsynced appends, 25 token events through JetStream
// and the SSE relay, read to the end. Reported as turns/s.
func BenchmarkEchoTurn(b *testing.B) {
	echoTurns(b, benchServer(b))
}

// echoTurns runs b.N whole turns on srv one after another, read to the
// end, and reports turns/s.
func echoTurns(b *testing.B, srv *waggletest.Server) {
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		resp := postChat(b, srv.URL, i)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
}

// BenchmarkEchoTurnParallel runs turns from several clients at once.
func BenchmarkEchoTurnParallel(b *testing.B) {
	srv := benchServer(b)
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			resp := postChat(b, srv.URL, i)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
}

// BenchmarkTimeToFirstEvent measures POST → first token event bytes at the
// client (echo delay 0): the time the gateway, bus, runner and store add
// before anything streams. p50/p99 reported.
func BenchmarkTimeToFirstEvent(b *testing.B) {
	srv := benchServer(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp := postChat(b, srv.URL, i)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(line) > 6 && line[:6] == "data: " {
				break
			}
		}
		lat = append(lat, time.Since(t0))
		io.Copy(io.Discard, r)
		resp.Body.Close()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkEchoTurnCoordination is BenchmarkEchoTurn with the runner's
// coordination state (turn leases, session queues) fsynced — NATS listens
// for other processes — and without an fsync, the session store recording
// the accepted turns (the desktop): the same run's ratio is what the
// recovery rule of docs/architecture.md buys. Compare with -count.
func BenchmarkEchoTurnCoordination(b *testing.B) {
	for _, mode := range []string{"fsynced", "async"} {
		b.Run(mode, func(b *testing.B) {
			srv := waggletest.Start(b, waggletest.WithConfig(func(c *appConfig) {
				c.TurnRunner.EchoDelay = 0
				if mode == "fsynced" {
					c.NATSListen = waggletest.FreeAddr(b)
				}
			}))
			echoTurns(b, srv)
		})
	}
}
