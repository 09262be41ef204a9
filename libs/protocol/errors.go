package protocol

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error that keeps its kind across the bus. Status is the HTTP
// status the gateway answers with; Message is safe to show a user; Code is
// the optional machine-readable code of the contract (e.g.
// "MESSAGE_TOO_LONG"). Internal detail never goes into an Error: it is
// logged where it happens.
type Error struct {
	Status  int    `json:"-"`
	Message string `json:"error"`
	Code    string `json:"code,omitempty"`
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("%d: %s", e.Status, e.Message)
}

// Errorf builds an Error with the given status and a formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// WithCode returns a copy of e carrying code.
func (e *Error) WithCode(code string) *Error {
	c := *e
	c.Code = code
	return &c
}

// Common error kinds.
var (
	// ErrInternal is what a client sees for any failure it cannot act on.
	ErrInternal = &Error{Status: http.StatusInternalServerError, Message: "Internal server error"}
	// ErrUnavailable means no service instance answered.
	ErrUnavailable = &Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable"}
	// ErrRunnerBusy means no turn runner could take a turn now: every one
	// is at its admission limit, or too loaded to answer in time.
	ErrRunnerBusy = (&Error{Status: http.StatusServiceUnavailable, Message: "The server is busy. Try again in a moment."}).WithCode("RUNNER_BUSY")
	// ErrBusUnavailable means this process has lost its NATS server and is
	// reconnecting. It is not ErrUnavailable: the service may well be
	// there once the bus is back.
	ErrBusUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "BUS_UNAVAILABLE",
		Message: "The server is reconnecting to its message bus. Try again in a moment."}
	// ErrStoreUnavailable means the database behind a store cannot be
	// reached (PostgreSQL down or restarting); the request did nothing.
	ErrStoreUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "STORE_UNAVAILABLE",
		Message: "The database is unavailable. Try again in a moment."}
)

// AsError returns the *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// StatusOf maps any error to an HTTP status: an *Error keeps its own,
// everything else is 500.
func StatusOf(err error) int {
	if e := AsError(err); e != nil && e.Status != 0 {
		return e.Status
	}
	return http.StatusInternalServerError
}
