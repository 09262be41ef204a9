// Package httpx holds the gateway's JSON plumbing shared by every route
// group: body decoding with the DESIGN §9 rules, typed field access, the
// safe-segment check, and the single mapping from error kinds to HTTP
// responses.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"

	"github.com/waggle-os/core/libs/protocol"
)

// ErrorBody is the JSON error of the contract: {"error": …, "code"?: …}.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// RequestError is an error in Fastify's default shape, which the original
// used for thrown validation errors and body-parser failures (reference
// §0.1): {"statusCode", "code"?, "error": <reason phrase>, "message"}.
type RequestError struct {
	Status  int
	Code    string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

func (e *RequestError) body() any {
	return struct {
		StatusCode int    `json:"statusCode"`
		Code       string `json:"code,omitempty"`
		Error      string `json:"error"`
		Message    string `json:"message"`
	}{e.Status, e.Code, http.StatusText(e.Status), e.Message}
}

// BadSegment is the error of the safe-segment rule for one named field.
func BadSegment(name string) error {
	return &RequestError{Status: http.StatusBadRequest, Message: "Invalid " + name + ": contains illegal characters"}
}

// CheckSegment applies the safe-segment rule (reference §1.4, max 128
// characters per DESIGN §9) to a named ID.
func CheckSegment(name, v string) error {
	if !protocol.ValidID(v) {
		return BadSegment(name)
	}
	return nil
}

// WriteError is the one place that maps an error to an HTTP response.
// Anything that is not a known kind is logged and answered as a bare 500:
// no internals reach the client.
func WriteError(w http.ResponseWriter, log *slog.Logger, err error) {
	var re *RequestError
	if errors.As(err, &re) {
		WriteJSON(w, re.Status, re.body())
		return
	}
	if pe := protocol.AsError(err); pe != nil {
		WriteJSON(w, pe.Status, ErrorBody{Error: pe.Message, Code: pe.Code})
		return
	}
	log.Error("request failed", "err", err)
	WriteJSON(w, http.StatusInternalServerError, ErrorBody{Error: protocol.ErrInternal.Message})
}

// WriteJSON writes v as the response body without HTML escaping.
func WriteJSON(w http.ResponseWriter, status int, v any) {
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

// Fields is a decoded JSON object body whose values are checked one by one,
// so a wrong type becomes a clear 400 instead of a decoding failure.
type Fields map[string]json.RawMessage

// DecodeBody reads a JSON object body. An empty body is {} (DESIGN §9: the
// web client sends a JSON content type on every request). A body that is
// valid JSON but not an object is also {}: its Fields are simply missing.
func DecodeBody(w http.ResponseWriter, r *http.Request, limit int64) (Fields, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &RequestError{Status: http.StatusRequestEntityTooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}
		}
		return nil, &RequestError{Status: http.StatusBadRequest, Message: "Could not read the request body"}
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Fields{}, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			return nil, &RequestError{Status: http.StatusUnsupportedMediaType, Code: "FST_ERR_CTP_INVALID_MEDIA_TYPE", Message: "Unsupported Media Type: " + mt}
		}
	}
	if !json.Valid(data) {
		return nil, &RequestError{Status: http.StatusBadRequest, Code: "FST_ERR_CTP_INVALID_JSON_BODY",
			Message: "Body is not valid JSON but content-type is set to 'application/json'"}
	}
	var f Fields
	if data[0] != '{' || json.Unmarshal(data, &f) != nil {
		return Fields{}, nil
	}
	return f, nil
}

// str returns a string field. present is false for a missing or null
// field; ok is false when the field is present but not a string.
func (f Fields) Str(key string) (v string, present, ok bool) {
	raw, found := f[key]
	if !found || string(raw) == "null" {
		return "", false, true
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", true, false
	}
	return v, true, true
}

// OptString returns an optional string field, or a 400 naming it.
func (f Fields) OptString(key string) (string, bool, error) {
	v, present, ok := f.Str(key)
	if !ok {
		return "", false, protocol.Errorf(http.StatusBadRequest, "%s must be a string", key)
	}
	return v, present, nil
}

// UTF16Len is the length of s in UTF-16 code units, as JavaScript counts.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Deps is what a route group needs from the gateway.
type Deps struct {
	// NC is the gateway's bus connection.
	NC *nats.Conn
	// Log is the gateway's logger.
	Log *slog.Logger
	// BodyLimit is the largest accepted request body in bytes.
	BodyLimit int64
	// Timeout bounds one bus request.
	Timeout time.Duration
	// DataDir is the absolute data directory.
	DataDir string
}

// Call sends req on subject and decodes the reply. On failure it writes the
// error response itself and returns ok=false, so handlers read:
//
//	rep, ok := httpx.Call[protocol.X](d, w, r, subject, req)
//	if !ok { return }
func Call[Rep any](d Deps, w http.ResponseWriter, r *http.Request, subject string, req any) (rep Rep, ok bool) {
	ctx, cancel := context.WithTimeout(r.Context(), d.Timeout)
	defer cancel()
	rep, err := bus.Request[Rep](ctx, d.NC, subject, req)
	if err != nil {
		WriteError(w, d.Log, err)
		return rep, false
	}
	return rep, true
}
