package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestURLIsolated checks each call gets its own empty database.
func TestURLIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("two calls gave one database: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database b sees a's table: n=%d err=%v", n, err)
	}
}

// TestRestartable: a restartable server refuses connections while stopped
// and keeps its data across the restart.
func TestRestartable(t *testing.T) {
	ctx := context.Background()
	pg := NewRestartable(t)
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	pg.Stop(t)
	if c, err := pgx.Connect(ctx, pg.URL); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	pg.Start(t)
	conn, err = pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var x int
	if err := conn.QueryRow(ctx, `SELECT x FROM kept`).Scan(&x); err != nil || x != 42 {
		t.Fatalf("after the restart: x=%d err=%v", x, err)
	}
}
