package pgerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgerr"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

func TestUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", fmt.Errorf("pgstore: history: %w", refused), true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", syscall.EPIPE, true},
		{"a full disk under a JSONL store", fmt.Errorf("jsonl: append: %w", &fs.PathError{Op: "write", Path: "/d/s.jsonl", Err: syscall.ENOSPC}), false},
		{"closed network connection", net.ErrClosed, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"query canceled", &pgconn.PgError{Code: "57014"}, false},
		{"caller's deadline", fmt.Errorf("pgstore: %w", context.DeadlineExceeded), false},
		{"caller cancelled", context.Canceled, false},
		{"truncated file", fmt.Errorf("grants: %w", io.ErrUnexpectedEOF), false},
		{"end of file", io.EOF, false},
		{"plain error", errors.New("boom"), false},
		{"not found", os.ErrNotExist, false},
	}
	for _, tt := range tests {
		if got := pgerr.Unavailable(tt.err); got != tt.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	down := fmt.Errorf("pgstore: %w", syscall.ECONNREFUSED)
	err := pgerr.Classify(down)
	if !errors.Is(err, protocol.ErrStoreUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Classify(refused) = %v", err)
	}
	if e := protocol.AsError(err); e == nil || e.Kind != protocol.Unavailable || e.Code != "STORE_UNAVAILABLE" {
		t.Fatalf("classified error = %+v", e)
	}
	other := errors.New("boom")
	if pgerr.Classify(other) != other {
		t.Fatal("Classify changed an unrelated error")
	}
	kept := fmt.Errorf("x: %w (%w)", protocol.Errorf(protocol.NotFound, "not found"), syscall.ECONNREFUSED)
	if pgerr.Classify(kept) != kept {
		t.Fatal("Classify replaced an error that already has a kind")
	}
}

// TestUnavailableAgainstRealServer: what pgxpool returns while the server
// is stopped is recognised; after the restart the same pool works again.
func TestUnavailableAgainstRealServer(t *testing.T) {
	pg := pgtest.NewRestartable(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (x int)`); err != nil {
		t.Fatal(err)
	}
	pg.Stop(t)
	for i := range 3 { // pooled connections (now dead), then new connects
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := pool.Exec(qctx, `INSERT INTO t VALUES (1)`)
		cancel()
		if err == nil || !pgerr.Unavailable(err) {
			t.Fatalf("query %d against a stopped server: %v (%T), want an unavailable error", i, err, err)
		}
	}
	pg.Start(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := pool.Exec(ctx, `INSERT INTO t VALUES (2)`)
		if err == nil {
			break
		}
		if !pgerr.Unavailable(err) || time.Now().After(deadline) {
			t.Fatalf("after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
