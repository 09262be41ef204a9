package gateway

import (
	"net/http"

	"github.com/waggle-os/core/services/gateway/spa"
	"github.com/waggle-os/core/services/gateway/webchat"
)

// pages serves the browser clients: the embedded web chat at "/" (or at
// "/chat/" when FrontendDir holds the desktop app, which then owns "/" with
// an index.html fallback for its deep links). They are public static
// files, so they are answered before auth: a team server's users must load
// the page before they can give it their token. Everything else, and every
// method but GET and HEAD, goes on to the API router.
func (s *Service) pages(next http.Handler) http.Handler {
	var app *spa.Handler
	if s.cfg.FrontendDir != "" {
		app = spa.New(s.cfg.FrontendDir)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case webchat.Owns(r.URL.Path, app == nil):
			webchat.Serve(w, r, next)
		case app != nil:
			app.Serve(w, r, next)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
