// Package spa serves a built single-page app from a directory the way the
// original Waggle server serves WAGGLE_FRONTEND_DIR: files as they are, and
// index.html for every other path so client-side routes (deep links) load
// the app. API-shaped paths never fall back: their misses stay the API's
// JSON 404.
package spa

import (
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
)

// Check reports whether dir holds a built app (an index.html).
func Check(dir string) error {
	st, err := os.Stat(dir + string(os.PathSeparator) + "index.html")
	if err != nil {
		return fmt.Errorf("frontend dir %s: no index.html: %w", dir, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("frontend dir %s: index.html is not a file", dir)
	}
	return nil
}

// Handler serves one app directory.
type Handler struct {
	dir string
}

// New returns a handler for dir (see Check).
func New(dir string) *Handler { return &Handler{dir: dir} }

// reserved reports paths that belong to the server, never to the app:
// the original's list (/api/, /v1/, /assets/ misses, /health, /ws) plus
// our /metrics.
func reserved(p string) bool {
	switch p {
	case "/api", "/health", "/ws", "/metrics":
		return true
	}
	return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/")
}

// Serve answers a GET or HEAD: a file of the app, index.html for a
// client-side route, or next (the router) for server paths and misses
// under /assets/.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	p := path.Clean("/" + r.URL.Path)
	if reserved(p) {
		next.ServeHTTP(w, r)
		return
	}
	if p != "/" && h.serveFile(w, r, p[1:]) {
		return
	}
	if strings.HasPrefix(p, "/assets/") {
		next.ServeHTTP(w, r)
		return
	}
	// The shell must be revalidated so a rebuilt app is picked up; its
	// hashed assets can be cached as usual.
	w.Header().Set("Cache-Control", "no-cache")
	if !h.serveFile(w, r, "index.html") {
		http.Error(w, "frontend index.html is missing", http.StatusInternalServerError)
	}
}

// serveFile serves name when it is a regular file inside the directory;
// os.OpenInRoot refuses anything (.., symlinks) that would leave it.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name string) bool {
	f, err := os.OpenInRoot(h.dir, name)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
	return true
}
