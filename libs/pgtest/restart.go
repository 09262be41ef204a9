package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Restartable is a PostgreSQL server of one test's own, made with the
// local initdb, that the test stops and starts again to see what an outage
// does. Its database and data survive the restart. The shared server of
// URL is never restarted: other tests use it.
type Restartable struct {
	c *localCluster
	// URL is the database the test uses, on this server.
	URL string
}

// NewRestartable creates the server and an empty database, removed when t
// ends. It skips t, loudly, when no local initdb can be had (Docker and
// WAGGLE_TEST_POSTGRES_URL servers cannot be restarted by a test).
func NewRestartable(t testing.TB) *Restartable {
	t.Helper()
	c, err := newLocalCluster()
	if err != nil {
		t.Skipf("pgtest: SKIPPING — no local PostgreSQL to restart: %v. Install PostgreSQL (initdb) to run this test.", err)
	}
	t.Cleanup(c.remove)
	if err := c.start(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	name := "waggle_t_" + randomHex(8)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return &Restartable{c: c, URL: c.url(name)}
}

// Stop shuts the server down (a fast shutdown, as `pg_ctl stop -m fast`)
// and returns when it has exited: connections are refused from then on.
func (r *Restartable) Stop(t testing.TB) {
	t.Helper()
	if err := r.c.stop(); err != nil {
		t.Fatalf("pgtest: stop: %v", err)
	}
}

// Start starts the server again on the same port and data, returning when
// it accepts connections.
func (r *Restartable) Start(t testing.TB) {
	t.Helper()
	if err := r.c.start(); err != nil {
		t.Fatalf("pgtest: start: %v", err)
	}
}
