// Package webchat is the browser chat client the gateway serves at "/" (and
// at "/chat/" when a desktop frontend owns "/"). Its HTML, CSS and
// JavaScript are embedded in the binary: no CDN, no build step, nothing to
// install. The scripts are plain browser JavaScript on purpose, so the
// files in static/ are the files that run and review needs no bundler.
//
// The page uses only the public HTTP API, exactly as any other client.
package webchat

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is where the assets live; the index is also served at "/".
const Prefix = "/chat/"

// files are the embedded assets by name; embed gives no modification
// time, so the process start stands in for it (a new binary means new files).
var (
	files   = map[string][]byte{}
	modTime = time.Now()
)

func init() {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		panic("webchat: embedded assets missing: " + err.Error())
	}
	for _, e := range entries {
		data, err := static.ReadFile("static/" + e.Name())
		if err != nil {
			panic("webchat: " + err.Error())
		}
		files[e.Name()] = data
	}
}

// Owns reports whether the web chat answers path when it is mounted at
// root as well as at Prefix.
func Owns(p string, atRoot bool) bool {
	return (atRoot && p == "/") || p == "/chat" || strings.HasPrefix(p, Prefix)
}

// Serve answers a GET or HEAD for one of the paths Owns accepts; an unknown
// asset is passed to notFound so misses keep the API's JSON 404.
func Serve(w http.ResponseWriter, r *http.Request, notFound http.Handler) {
	p := r.URL.Path
	if p == "/chat" {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name := strings.TrimPrefix(p, Prefix)
	if p == "/" || name == "" {
		name = "index.html"
	}
	data, ok := files[path.Clean(name)]
	if !ok || strings.Contains(name, "/") {
		notFound.ServeHTTP(w, r)
		return
	}
	// The page is small; revalidating every load keeps an upgraded binary's
	// page and scripts in step.
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, modTime, bytes.NewReader(data))
}
