package gateway

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/llmprobe"

	"github.com/waggle-os/core/services/gateway/internal/openapi"
)

// notDescribed are routes the router serves that the OpenAPI description
// leaves out on purpose, each with the reason. Keep it short: an API route
// belongs in the description. (The browser pages — web chat, a
// --frontend-dir app — are not router routes at all: the pages middleware
// serves them ahead of the router, so chi.Walk never sees them.)
var notDescribed = map[string]string{}

// routerRoutes walks the gateway's chi router: "METHOD /pattern" → handler.
func routerRoutes(t *testing.T) map[string]http.Handler {
	t.Helper()
	cfg := Config{DataDir: t.TempDir(), Probe: llmprobe.Config{URL: "http://127.0.0.1:1/v1"}}
	if err := cfg.prepare(); err != nil {
		t.Fatal(err)
	}
	s := New(cfg, nil, nil, nil)
	s.cfg = cfg
	mux, ok := s.routes().(chi.Routes)
	if !ok {
		t.Fatalf("routes() is %T, not a chi router", s.routes())
	}
	out := map[string]http.Handler{}
	err := chi.Walk(mux, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
		out[method+" "+route] = h
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRouterMatchesDescription fails when the router serves a route the
// OpenAPI description lacks, or the description names one the router
// lacks. Path parameters are compared by name: chi's {id} is OpenAPI's
// {id}.
func TestRouterMatchesDescription(t *testing.T) {
	served := routerRoutes(t)
	described := map[string]bool{}
	for _, r := range openapi.Routes() {
		described[r.Method+" "+r.Path] = true
	}
	var missing, extra []string
	for key := range served {
		if _, skip := notDescribed[key]; skip {
			continue
		}
		if !described[key] {
			missing = append(missing, key)
		}
	}
	for key := range described {
		if _, ok := served[key]; !ok {
			extra = append(extra, key)
		}
	}
	for key := range notDescribed {
		if _, ok := served[key]; !ok {
			extra = append(extra, key+" (in notDescribed)")
		}
		if described[key] {
			t.Errorf("%s is both described and in notDescribed", key)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	for _, key := range missing {
		t.Errorf("the router serves %s but the OpenAPI description (internal/openapi/routes.go) lacks it", key)
	}
	for _, key := range extra {
		t.Errorf("the OpenAPI description names %s but the router does not serve it", key)
	}
	if len(served) < 50 {
		t.Errorf("walked only %d routes: the walk is broken", len(served))
	}
}

// TestOpenAPIServed checks the route serves the document and that the
// description names the gateway's turn-id header.
func TestOpenAPIServed(t *testing.T) {
	served := routerRoutes(t)
	h, ok := served["GET /api/openapi.json"]
	if !ok {
		t.Fatal("GET /api/openapi.json is not mounted")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !strings.Contains(rec.Body.String(), `"openapi": "3.1.0"`) {
		t.Fatalf("not an OpenAPI 3.1 document: %.200s", rec.Body.String())
	}
	chat := openapi.Build().Paths["/api/chat"]["post"]
	if _, ok := chat.Responses["200"].Headers[HeaderTurnID]; !ok {
		t.Errorf("POST /api/chat's 200 does not name the %s header", HeaderTurnID)
	}
}
