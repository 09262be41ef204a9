package protocol

import (
	"errors"
	"fmt"
)

// Kind says what sort of failure an Error is, in terms a caller can act on
// (fix the request, try again, give up). Services choose a kind; only the
// gateway turns a kind into an HTTP status, in one table. The zero Kind is
// Internal, so an error whose kind was lost is never mistaken for the
// caller's fault.
type Kind uint8

// The kinds. Their wire names (Kind.String) cross the bus in the micro
// error-code header.
const (
	Internal         Kind = iota // a failure the caller cannot act on
	Invalid                      // the request is malformed or breaks a rule
	Unauthenticated              // no or an unknown credential
	Forbidden                    // the credential may not do this
	NotFound                     // what the request names does not exist
	MethodNotAllowed             // the route exists, the method does not
	Conflict                     // the request clashes with the current state
	TooLarge                     // the request is too big
	UnsupportedMedia             // the body is not of a type we read
	RateLimited                  // too many requests; try again later
	Unavailable                  // a dependency is not there now; try again
	StorageFull                  // a store has no space left for the write
)

var kindNames = [...]string{
	Internal:         "internal",
	Invalid:          "invalid",
	Unauthenticated:  "unauthenticated",
	Forbidden:        "forbidden",
	NotFound:         "not_found",
	MethodNotAllowed: "method_not_allowed",
	Conflict:         "conflict",
	TooLarge:         "too_large",
	UnsupportedMedia: "unsupported_media",
	RateLimited:      "rate_limited",
	Unavailable:      "unavailable",
	StorageFull:      "storage_full",
}

// String is the kind's wire name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return kindNames[Internal]
}

// ParseKind reads a wire name; an unknown one is Internal.
func ParseKind(s string) Kind {
	for k, name := range kindNames {
		if name == s {
			return Kind(k)
		}
	}
	return Internal
}

// Error is an error that keeps its kind across the bus. Message is safe to
// show a user; Code is the optional machine-readable code of the contract
// (e.g. "MESSAGE_TOO_LONG"). Internal detail never goes into an Error: it
// is logged where it happens.
type Error struct {
	Kind    Kind   `json:"-"`
	Message string `json:"error"`
	Code    string `json:"code,omitempty"`
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s %s: %s", e.Kind, e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

// Errorf builds an Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// WithCode returns a copy of e carrying code.
func (e *Error) WithCode(code string) *Error {
	c := *e
	c.Code = code
	return &c
}

// Common errors.
var (
	// ErrInternal is what a client sees for any failure it cannot act on.
	ErrInternal = &Error{Kind: Internal, Message: "Internal server error"}
	// ErrUnavailable means no service instance answered.
	ErrUnavailable = &Error{Kind: Unavailable, Message: "Service unavailable"}
	// ErrRunnerBusy means no turn runner could take a turn now: every one
	// is at its admission limit, or too loaded to answer in time.
	ErrRunnerBusy = &Error{Kind: Unavailable, Code: "RUNNER_BUSY", Message: "The server is busy. Try again in a moment."}
	// ErrTurnExists answers a start of a turn id that was already
	// accepted: a second delivery of the same start (a gateway sends a
	// start again when its first may have been lost on the bus).
	ErrTurnExists = &Error{Kind: Conflict, Code: "TURN_EXISTS", Message: "This turn already exists."}
	// ErrBusUnavailable means this process has lost its NATS server and is
	// reconnecting, or the bus cannot answer for a moment (a NATS cluster
	// electing the leader of a stream or bucket after a node loss). It is
	// not ErrUnavailable: the service may well be there once the bus is
	// back.
	ErrBusUnavailable = &Error{Kind: Unavailable, Code: "BUS_UNAVAILABLE",
		Message: "The server is reconnecting to its message bus. Try again in a moment."}
	// ErrStoreUnavailable means the database behind a store cannot be
	// reached (PostgreSQL down or restarting); the request did nothing.
	ErrStoreUnavailable = &Error{Kind: Unavailable, Code: "STORE_UNAVAILABLE",
		Message: "The database is unavailable. Try again in a moment."}
	// ErrBusTimeout means a service did not answer within the caller's
	// deadline. The service was told the same deadline (libs/bus carries
	// it with the request) and does not start a write once it has passed.
	ErrBusTimeout = &Error{Kind: Unavailable, Code: "BUS_TIMEOUT",
		Message: "The server did not answer in time. Try again in a moment."}
)

// AsError returns the *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// KindOf is the kind of err: an *Error's own, Internal for anything else.
func KindOf(err error) Kind {
	if e := AsError(err); e != nil {
		return e.Kind
	}
	return Internal
}
