package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// errorBody is the JSON error of the contract: {"error": …, "code"?: …}.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// requestError is an error in Fastify's default shape, which the original
// used for thrown validation errors and body-parser failures (reference
// §0.1): {"statusCode", "code"?, "error": <reason phrase>, "message"}.
type requestError struct {
	Status  int
	Code    string
	Message string
}

func (e *requestError) Error() string { return e.Message }

func (e *requestError) body() any {
	return struct {
		StatusCode int    `json:"statusCode"`
		Code       string `json:"code,omitempty"`
		Error      string `json:"error"`
		Message    string `json:"message"`
	}{e.Status, e.Code, http.StatusText(e.Status), e.Message}
}

// badSegment is the error of the safe-segment rule for one named field.
func badSegment(name string) error {
	return &requestError{Status: http.StatusBadRequest, Message: "Invalid " + name + ": contains illegal characters"}
}

// checkSegment applies the safe-segment rule (reference §1.4, max 128
// characters per DESIGN §9) to a named ID.
func checkSegment(name, v string) error {
	if !protocol.ValidID(v) {
		return badSegment(name)
	}
	return nil
}

// writeError is the one place that maps an error to an HTTP response.
// Anything that is not a known kind is logged and answered as a bare 500:
// no internals reach the client.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	var re *requestError
	if errors.As(err, &re) {
		writeJSON(w, re.Status, re.body())
		return
	}
	if pe := protocol.AsError(err); pe != nil {
		writeJSON(w, pe.Status, errorBody{Error: pe.Message, Code: pe.Code})
		return
	}
	log.Error("request failed", "err", err)
	writeJSON(w, http.StatusInternalServerError, errorBody{Error: protocol.ErrInternal.Message})
}

// writeJSON writes v as the response body without HTML escaping.
func writeJSON(w http.ResponseWriter, status int, v any) {
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

// fields is a decoded JSON object body whose values are checked one by one,
// so a wrong type becomes a clear 400 instead of a decoding failure.
type fields map[string]json.RawMessage

// decodeBody reads a JSON object body. An empty body is {} (DESIGN §9: the
// web client sends a JSON content type on every request). A body that is
// valid JSON but not an object is also {}: its fields are simply missing.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64) (fields, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &requestError{Status: http.StatusRequestEntityTooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}
		}
		return nil, &requestError{Status: http.StatusBadRequest, Message: "Could not read the request body"}
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return fields{}, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			return nil, &requestError{Status: http.StatusUnsupportedMediaType, Code: "FST_ERR_CTP_INVALID_MEDIA_TYPE", Message: "Unsupported Media Type: " + mt}
		}
	}
	if !json.Valid(data) {
		return nil, &requestError{Status: http.StatusBadRequest, Code: "FST_ERR_CTP_INVALID_JSON_BODY",
			Message: "Body is not valid JSON but content-type is set to 'application/json'"}
	}
	var f fields
	if data[0] != '{' || json.Unmarshal(data, &f) != nil {
		return fields{}, nil
	}
	return f, nil
}

// str returns a string field. present is false for a missing or null
// field; ok is false when the field is present but not a string.
func (f fields) str(key string) (v string, present, ok bool) {
	raw, found := f[key]
	if !found || string(raw) == "null" {
		return "", false, true
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", true, false
	}
	return v, true, true
}

// optString returns an optional string field, or a 400 naming it.
func (f fields) optString(key string) (string, bool, error) {
	v, present, ok := f.str(key)
	if !ok {
		return "", false, protocol.Errorf(http.StatusBadRequest, "%s must be a string", key)
	}
	return v, present, nil
}

// utf16Len is the length of s in UTF-16 code units, as JavaScript counts.
func utf16Len(s string) int {
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
