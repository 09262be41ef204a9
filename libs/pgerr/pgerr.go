// Package pgerr tells an unreachable PostgreSQL apart from every other
// database failure, so a store answers 503 STORE_UNAVAILABLE (try again)
// during an outage instead of 500 (a bug), and the pool's own reconnecting
// does the rest.
package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waggle-os/core/libs/protocol"
)

// Unavailable reports whether err means the database could not be reached
// or went away mid-request: a failed connect, a refused or reset
// connection, a server shutting down or starting up. Errors of a
// reachable server (constraint violations, bad SQL) are not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	// A file's error (a JSONL store beside the database: a full disk, a
	// missing file) is not a database outage.
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return false
	}
	// Not io.EOF or io.ErrUnexpectedEOF: a truncated file or JSON body
	// says the same, and a store's other handlers read files.
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	// The caller's deadline or cancellation is not an outage (a connect
	// that timed out is a ConnectError, above); context.DeadlineExceeded
	// would otherwise pass for a net.Error.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// pgx's own "conn closed" is the safe-to-retry error of a connection
	// that died: the query never reached a server.
	return pgconn.SafeToRetry(err)
}

// Classify returns err marked as protocol.ErrStoreUnavailable when the
// database is unreachable, else err itself. It is a
// bus.ServiceConfig.MapError.
func Classify(err error) error {
	if !Unavailable(err) || protocol.AsError(err) != nil {
		return err
	}
	return fmt.Errorf("%w (%w)", protocol.ErrStoreUnavailable, err)
}
