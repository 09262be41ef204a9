// Package respond writes the gateway's JSON responses, and is the one place
// an error becomes an HTTP status: Status maps every protocol.Kind, and
// Error renders any error with it.
package respond

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// statuses is the kind → HTTP status table.
var statuses = [...]int{
	protocol.Internal:         http.StatusInternalServerError,
	protocol.Invalid:          http.StatusBadRequest,
	protocol.Unauthenticated:  http.StatusUnauthorized,
	protocol.Forbidden:        http.StatusForbidden,
	protocol.NotFound:         http.StatusNotFound,
	protocol.MethodNotAllowed: http.StatusMethodNotAllowed,
	protocol.Conflict:         http.StatusConflict,
	protocol.TooLarge:         http.StatusRequestEntityTooLarge,
	protocol.UnsupportedMedia: http.StatusUnsupportedMediaType,
	protocol.RateLimited:      http.StatusTooManyRequests,
	protocol.Unavailable:      http.StatusServiceUnavailable,
	protocol.StorageFull:      http.StatusInsufficientStorage,
}

// Status is the HTTP status of kind.
func Status(kind protocol.Kind) int {
	if int(kind) < len(statuses) && statuses[kind] != 0 {
		return statuses[kind]
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON error of the contract: {"error": …, "code"?: …}.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// RequestError is an error in Fastify's default shape, which the original
// used for thrown validation errors and body-parser failures (reference
// §0.1): {"statusCode", "code"?, "error": <reason phrase>, "message"}.
type RequestError struct {
	Kind    protocol.Kind
	Code    string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

func (e *RequestError) body() any {
	status := Status(e.Kind)
	return struct {
		StatusCode int    `json:"statusCode"`
		Code       string `json:"code,omitempty"`
		Error      string `json:"error"`
		Message    string `json:"message"`
	}{status, e.Code, http.StatusText(status), e.Message}
}

// Error writes err as the response. A bus that cannot answer for now
// (bus.Unavailable) is a 503 BUS_UNAVAILABLE; anything else that is not a
// *protocol.Error or a *RequestError is logged and answered as a bare 500:
// no internals reach the client.
func Error(w http.ResponseWriter, log *slog.Logger, err error) {
	var re *RequestError
	if errors.As(err, &re) {
		JSON(w, Status(re.Kind), re.body())
		return
	}
	if pe := protocol.AsError(err); pe != nil {
		JSON(w, Status(pe.Kind), ErrorBody{Error: pe.Message, Code: pe.Code})
		return
	}
	if bus.Unavailable(err) {
		// The gateway's own JetStream call found no leader (a cluster
		// electing one after a node loss) or no connection: a 503 to
		// retry, not a 500.
		log.Warn("request failed: bus unavailable", "err", err)
		JSON(w, Status(protocol.ErrBusUnavailable.Kind), ErrorBody{Error: protocol.ErrBusUnavailable.Message, Code: protocol.ErrBusUnavailable.Code})
		return
	}
	log.Error("request failed", "err", err)
	JSON(w, http.StatusInternalServerError, ErrorBody{Error: protocol.ErrInternal.Message})
}

// Fail writes an error of kind with a message and an optional code: the
// short form of Error for an error made on the spot.
func Fail(w http.ResponseWriter, kind protocol.Kind, code, message string) {
	JSON(w, Status(kind), ErrorBody{Error: message, Code: code})
}

// JSON writes v as the response body without HTML escaping.
func JSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"Internal server error"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
