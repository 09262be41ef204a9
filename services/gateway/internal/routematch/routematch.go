// Package routematch finds which route of the router a request is for,
// from middleware that runs before chi has routed it.
package routematch

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// Match matches r against the router it runs in: its route pattern and
// path parameters ("" when nothing matches).
func Match(r *http.Request) (string, map[string]string) {
	rc := chi.RouteContext(r.Context())
	if rc == nil || rc.Routes == nil {
		return "", nil
	}
	tctx := chi.NewRouteContext()
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	pattern := rc.Routes.Find(tctx, r.Method, path)
	if pattern == "" {
		return "", nil
	}
	params := make(map[string]string, len(tctx.URLParams.Keys))
	for i, k := range tctx.URLParams.Keys {
		params[k] = tctx.URLParams.Values[i]
	}
	return pattern, params
}
