// Package natstest gives a test a real NATS server: an embedded
// nats-server with JetStream (the same libs/embednats the desktop build
// runs), storage in the test's temporary directory, a loopback TCP
// listener, and connections that are closed before the server stops when
// the test ends.
package natstest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/embednats"
)

// stopTimeout bounds the server's shutdown at the end of a test.
const stopTimeout = 10 * time.Second

// Server is one test's NATS server.
type Server struct {
	t  testing.TB
	ns *embednats.Server
}

// Start starts a server for t. Cleanup stops it after everything t
// registered later (the connections of Conn, services stopped in cleanup),
// so nothing talks to a server that is gone.
func Start(t testing.TB) *Server {
	t.Helper()
	ns := embednats.New(embednats.Config{StoreDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:0"})
	if err := ns.Start(context.Background()); err != nil {
		t.Fatalf("natstest: start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := ns.Stop(ctx); err != nil {
			t.Errorf("natstest: %v", err)
		}
	})
	return &Server{t: t, ns: ns}
}

// URL is the server's TCP client URL, for code that dials by URL (an
// external-NATS configuration, a second process).
func (s *Server) URL() string { return s.ns.ClientURL() }

// ConnectOption dials the server in process, as the embedded desktop
// build does (bus.OptionDialer takes it).
func (s *Server) ConnectOption() nats.Option { return s.ns.ConnectOption() }

// Dial opens a named in-process connection that the caller owns and
// closes; it has the shape of bus.Dialer, so a service under test can take
// it (bus.Dialer(srv.Dial)).
func (s *Server) Dial(name string) (*nats.Conn, error) {
	return nats.Connect("", s.ns.ConnectOption(), nats.Name(name))
}

// Conn opens a named in-process connection for the test itself; it fails
// the test if the dial fails and is closed when the test ends.
func (s *Server) Conn(name string) *nats.Conn {
	s.t.Helper()
	nc, err := s.Dial(name)
	if err != nil {
		s.t.Fatalf("natstest: connect %s: %v", name, err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}
