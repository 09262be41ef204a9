// Package filesapi serves a workspace's file routes in the original's
// shapes: /api/workspaces/{id}/files/list, download, upload, mkdir,
// delete, move and copy. A turn runner does the work on the directory the
// file tools use, under their confinement rules (no "..", an absolute
// path is read inside the workspace, no symlink out).
//
// Who may call: locally any client the edge lets through; on a team
// server a member of the workspace's team, viewers only list and download
// (teamauth: ActionRead for those two, ActionWrite for the rest).
// Downloads are always attachments under a sandbox CSP, so a stored HTML
// file never runs as the server's own page.
package filesapi

import (
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// FormRoute is the route pattern of the upload, the one route whose body
// may be multipart/form-data as well as JSON (the gateway's media-type
// rule lets a form through to it alone).
const FormRoute = "/api/workspaces/{id}/files/upload"

// uploadBodyLimit admits a MaxFileTransfer file base64-encoded in JSON.
const uploadBodyLimit = protocol.MaxFileTransfer/3*4 + 64<<10

// errTooLarge is the original's 413 for a file over the limit.
var errTooLarge = protocol.Errorf(protocol.TooLarge, "File exceeds %dMB limit", protocol.MaxFileTransfer>>20)

// isRequestTooLarge tells input.Decode's 413 (a body past its limit).
func isRequestTooLarge(err error) bool {
	var re *respond.RequestError
	return errors.As(err, &re) && re.Kind == protocol.TooLarge
}

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Get("/workspaces/{id}/files/list", h.list)
	r.Get("/workspaces/{id}/files/download", h.download)
	r.Post(strings.TrimPrefix(FormRoute, "/api"), h.upload)
	r.Post("/workspaces/{id}/files/mkdir", h.mkdir)
	r.Post("/workspaces/{id}/files/delete", h.remove)
	r.Post("/workspaces/{id}/files/move", h.move)
	r.Post("/workspaces/{id}/files/copy", h.copy)
}

type handlers struct{ d forward.Deps }

// workspace is the authorized workspace (the {id} teamauth checked).
func (h handlers) workspace(w http.ResponseWriter, r *http.Request) (string, bool) {
	sc, _ := teamauth.ScopeFrom(r.Context())
	ws := sc.Workspace
	if ws == "" {
		ws = chi.URLParam(r, "id")
	}
	if err := input.CheckSegment("workspaceId", ws); err != nil {
		respond.Error(w, h.d.Log, err)
		return "", false
	}
	return ws, true
}

func (h handlers) call(w http.ResponseWriter, r *http.Request, req protocol.FilesRequest) (protocol.FilesReply, bool) {
	ws, ok := h.workspace(w, r)
	if !ok {
		return protocol.FilesReply{}, false
	}
	req.Workspace = ws
	return forward.Call(h.d, w, r, protocol.WorkspaceFiles, req)
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "/"
	}
	rep, ok := h.call(w, r, protocol.FilesRequest{Op: protocol.FilesList, Path: p})
	if !ok {
		return
	}
	if rep.Entries == nil {
		rep.Entries = []protocol.FileEntry{}
	}
	respond.JSON(w, http.StatusOK, rep.Entries)
}

func (h handlers) download(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "path query parameter is required"))
		return
	}
	rep, ok := h.call(w, r, protocol.FilesRequest{Op: protocol.FilesRead, Path: p})
	if !ok {
		return
	}
	name := path.Base(p)
	ctype := "application/octet-stream"
	if rep.Entry != nil && rep.Entry.MimeType != "" {
		ctype = rep.Entry.MimeType
	}
	hd := w.Header()
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	hd.Set("Content-Length", strconv.Itoa(len(rep.Data)))
	hd.Set("Content-Security-Policy", "sandbox")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rep.Data)
}

// upload is JSON {path, name, data}: data is the file in base64, written
// to path/name; or a multipart form, as the original app sends it
// (uploadForm).
//
// A body that cannot hold a file of MaxFileTransfer bytes or less is
// refused with the original's 413 text: by its Content-Length before a
// byte of it is read, or (sent chunked) once reading passes the limit.
func (h handlers) upload(w http.ResponseWriter, r *http.Request) {
	if mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		h.uploadForm(w, r, params["boundary"])
		return
	}
	if r.ContentLength > uploadBodyLimit {
		respond.Error(w, h.d.Log, errTooLarge)
		return
	}
	f, err := input.Decode(w, r, uploadBodyLimit)
	if isRequestTooLarge(err) {
		respond.Error(w, h.d.Log, errTooLarge)
		return
	}
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	dir, _, ok1 := f.Str("path")
	name, _, ok2 := f.Str("name")
	data, present, ok3 := f.Str("data")
	if !ok1 || !ok2 || !ok3 || dir == "" || name == "" || !present {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "Provide {path, name, data} as JSON (data in base64)"))
		return
	}
	if err := checkFileName(name); err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "data must be base64"))
		return
	}
	if len(raw) > protocol.MaxFileTransfer {
		respond.Error(w, h.d.Log, errTooLarge)
		return
	}
	rep, ok := h.call(w, r, protocol.FilesRequest{Op: protocol.FilesWrite, Path: path.Join(dir, name), Data: raw})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusCreated, rep.Entry)
}

// checkFileName refuses a name that is not one path segment: the
// directory comes from the path field, and the runner confines the
// joined path to the workspace. A backslash (a Windows path, as old
// browsers sent a form's filename) and control characters are refused
// too rather than written into a name.
func checkFileName(name string) error {
	if name == "" || name != path.Base(name) || name == "." || name == ".." ||
		strings.Contains(name, `\`) || strings.ContainsFunc(name, unicode.IsControl) {
		return protocol.Errorf(protocol.Invalid, "name must be a file name, not a path")
	}
	return nil
}

// pathBody reads {"path": "…"}.
func (h handlers) pathBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return "", false
	}
	p, _, ok := f.Str("path")
	if !ok || p == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "path is required"))
		return "", false
	}
	return p, true
}

func (h handlers) mkdir(w http.ResponseWriter, r *http.Request) {
	p, ok := h.pathBody(w, r)
	if !ok {
		return
	}
	rep, ok := h.call(w, r, protocol.FilesRequest{Op: protocol.FilesMkdir, Path: p})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusCreated, rep.Entry)
}

func (h handlers) remove(w http.ResponseWriter, r *http.Request) {
	p, ok := h.pathBody(w, r)
	if !ok {
		return
	}
	if _, ok := h.call(w, r, protocol.FilesRequest{Op: protocol.FilesDelete, Path: p}); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h handlers) move(w http.ResponseWriter, r *http.Request) { h.transfer(w, r, protocol.FilesMove) }
func (h handlers) copy(w http.ResponseWriter, r *http.Request) { h.transfer(w, r, protocol.FilesCopy) }

func (h handlers) transfer(w http.ResponseWriter, r *http.Request, op string) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	from, _, ok1 := f.Str("from")
	to, _, ok2 := f.Str("to")
	if !ok1 || !ok2 || from == "" || to == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "from and to are required"))
		return
	}
	rep, ok := h.call(w, r, protocol.FilesRequest{Op: op, Path: from, To: to})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, rep.Entry)
}
