// Package input reads what a request brings: JSON object bodies with the
// DESIGN §9 rules, typed field access with a clear error per field, and the
// safe-segment rule for IDs.
package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// BadSegment is the error of the safe-segment rule for one named field.
func BadSegment(name string) error {
	return &respond.RequestError{Kind: protocol.Invalid, Message: "Invalid " + name + ": contains illegal characters"}
}

// CheckSegment applies the safe-segment rule (reference §1.4, max 128
// characters per DESIGN §9) to a named ID.
func CheckSegment(name, v string) error {
	if !protocol.ValidID(v) {
		return BadSegment(name)
	}
	return nil
}

// Fields is a decoded JSON object body whose values are checked one by one,
// so a wrong type becomes a clear 400 instead of a decoding failure.
type Fields map[string]json.RawMessage

// Decode reads a JSON object body. An empty body is {} (DESIGN §9: the
// web client sends a JSON content type on every request). A body that is
// valid JSON but not an object is also {}: its Fields are simply missing.
// The Content-Type was checked once for every route, before routing (the
// gateway's jsonBody middleware): a body that reaches a handler is JSON
// by its type.
func Decode(w http.ResponseWriter, r *http.Request, limit int64) (Fields, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &respond.RequestError{Kind: protocol.TooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}
		}
		return nil, &respond.RequestError{Kind: protocol.Invalid, Message: "Could not read the request body"}
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Fields{}, nil
	}
	if !json.Valid(data) {
		return nil, &respond.RequestError{Kind: protocol.Invalid, Code: "FST_ERR_CTP_INVALID_JSON_BODY",
			Message: "Body is not valid JSON but content-type is set to 'application/json'"}
	}
	var f Fields
	if data[0] != '{' || json.Unmarshal(data, &f) != nil {
		return Fields{}, nil
	}
	return f, nil
}

// Str returns a string field. present is false for a missing or null
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

// OptString returns an optional string field, or an Invalid error naming it.
func (f Fields) OptString(key string) (string, bool, error) {
	v, present, ok := f.Str(key)
	if !ok {
		return "", false, protocol.Errorf(protocol.Invalid, "%s must be a string", key)
	}
	return v, present, nil
}

// SameOrigin reports whether origin (a request's Origin header) names the
// host:port of hostHeader (its Host, already judged by the gateway's Host
// check): the server's own page. A port left out on either side is the
// scheme's default, so an https page behind a TLS-terminating proxy is
// its server's own too. The edge's origin rule and the MCP configuration
// routes both ask this one question.
func SameOrigin(origin, hostHeader string) bool {
	if hostHeader == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	withPort := func(hostport string) string {
		hostport = strings.ToLower(hostport)
		if h := hostOnly(hostport); h == hostport || "["+h+"]" == hostport {
			return hostport + ":" + def
		}
		return hostport
	}
	return withPort(u.Host) == withPort(hostHeader)
}

// hostOnly is the host of a host[:port] (brackets of an IPv6 literal
// removed).
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return h[1 : len(h)-1]
	}
	return h
}
