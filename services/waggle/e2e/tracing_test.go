package e2e

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestTraceContextExported: a client's W3C traceparent reaches the spans of
// the gateway and of the services behind the bus, and those spans are
// exported over OTLP/HTTP.
func TestTraceContextExported(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.OTLPEndpoint = collector.URL }))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	st := srv.Chat(map[string]any{"message": "trace me"}, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	st.All(t)
	srv.Stop() // flushes the batch exporter

	raw, _ := hex.DecodeString(traceID)
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("no spans exported")
	}
	var names int
	for _, b := range bodies {
		if bytes.Contains(b, raw) {
			for _, n := range []string{"POST /api/chat", "waggle-turnrunner/start", "waggle-sessionstore/append"} {
				if bytes.Contains(b, []byte(n)) {
					names++
				}
			}
		}
	}
	if names < 2 {
		t.Fatalf("spans of the client's trace from gateway and bus services not found (%d batches)", len(bodies))
	}
}
