package embednats_test

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/waitfor"
)

// TestSlowConsumerIsAWarning: a client that stops reading is cut off by
// the server once what waits for it passes its limit, and the log says so
// at warn level (the server's notices are debug): a service cut off this
// way loses the requests in flight on its connection, and the operator
// must see why.
func TestSlowConsumerIsAWarning(t *testing.T) {
	var logged syncBuffer
	s := embednats.New(embednats.Config{
		StoreDir: filepath.Join(t.TempDir(), "nats"),
		Listen:   "127.0.0.1:0",
		Logger:   slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })

	// A client that subscribes, then never reads again.
	c, err := net.Dial("tcp", strings.TrimPrefix(s.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB big 1\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "PONG\r\n" {
			break
		}
	}

	nc, err := nats.Connect("", s.ConnectOption())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	payload := make([]byte, 1<<20)
	waitfor.True(t, "a warning that the client was too slow", func() bool {
		for range 16 {
			if err := nc.Publish("big", payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(logged.String(), "level=WARN") && strings.Contains(logged.String(), "Slow Consumer")
	})
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
