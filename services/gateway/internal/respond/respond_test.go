package respond

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// Every kind has its own status: the table has no hole that would answer
// a kind as a 500 by accident.
func TestEveryKindHasAStatus(t *testing.T) {
	want := map[protocol.Kind]int{
		protocol.Internal:         500,
		protocol.Invalid:          400,
		protocol.Unauthenticated:  401,
		protocol.Forbidden:        403,
		protocol.NotFound:         404,
		protocol.MethodNotAllowed: 405,
		protocol.Conflict:         409,
		protocol.TooLarge:         413,
		protocol.UnsupportedMedia: 415,
		protocol.RateLimited:      429,
		protocol.Unavailable:      503,
		protocol.StorageFull:      507,
	}
	for k := protocol.Internal; k <= protocol.StorageFull; k++ {
		if got := Status(k); got != want[k] {
			t.Errorf("Status(%s) = %d, want %d", k, got, want[k])
		}
	}
	if got := Status(protocol.Kind(200)); got != 500 {
		t.Errorf("an unknown kind answers %d", got)
	}
}

func TestErrorBodies(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"contract error", fmt.Errorf("store: %w", protocol.Errorf(protocol.NotFound, "Session not found")), 404,
			`{"error":"Session not found"}`},
		{"with code", protocol.ErrRunnerBusy, 503, `{"error":"The server is busy. Try again in a moment.","code":"RUNNER_BUSY"}`},
		{"fastify shape", &RequestError{Kind: protocol.TooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}, 413,
			`{"statusCode":413,"code":"FST_ERR_CTP_BODY_TOO_LARGE","error":"Request Entity Too Large","message":"Request body is too large"}`},
		{"internals stay out", errors.New("open /var/lib/waggle/x: permission denied"), 500, `{"error":"Internal server error"}`},
		// The gateway's own JetStream call during a cluster election.
		{"stream without a leader", fmt.Errorf("gateway: turn stream: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), 503,
			`{"error":"The server is reconnecting to its message bus. Try again in a moment.","code":"BUS_UNAVAILABLE"}`},
		{"unanswered JetStream request", fmt.Errorf("gateway: lease: %w", jetstream.ErrNoStreamResponse), 503,
			`{"error":"The server is reconnecting to its message bus. Try again in a moment.","code":"BUS_UNAVAILABLE"}`},
	}
	for _, tc := range tests {
		rec := httptest.NewRecorder()
		Error(rec, log, tc.err)
		if rec.Code != tc.status || !jsonEqual(t, rec.Body.Bytes(), tc.body) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, rec.Code, rec.Body, tc.status, tc.body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s: content type %q", tc.name, ct)
		}
	}
	rec := httptest.NewRecorder()
	Fail(rec, protocol.Unauthenticated, protocol.CodeMissingToken, "Unauthorized")
	if rec.Code != http.StatusUnauthorized || !jsonEqual(t, rec.Body.Bytes(), `{"error":"Unauthorized","code":"MISSING_TOKEN"}`) {
		t.Errorf("Fail: %d %s", rec.Code, rec.Body)
	}
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
