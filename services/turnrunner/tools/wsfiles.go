package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// The workspace file routes (list, download, upload, mkdir, delete, move,
// copy) act on the same directory as the file tools and under the same
// rules: a path is resolved with resolve (no "..", an absolute path is
// read inside the directory) and every operation goes through os.Root,
// which refuses a symlink that leads outside.

// Files answers protocol.FilesRequest on one files directory.
type Files struct {
	// Dir is the workspace's files directory (absolute).
	Dir string
}

// Do runs one operation. Errors are protocol errors whose messages name
// only workspace-relative paths.
func (f Files) Do(req protocol.FilesRequest) (protocol.FilesReply, error) {
	env := Env{FilesDir: f.Dir}
	switch req.Op {
	case protocol.FilesList:
		return f.list(env, req.Path)
	case protocol.FilesRead:
		return f.read(env, req.Path)
	case protocol.FilesWrite:
		return f.write(env, req.Path, req.Data)
	case protocol.FilesMkdir:
		return f.mkdir(env, req.Path)
	case protocol.FilesDelete:
		return protocol.FilesReply{}, f.remove(env, req.Path)
	case protocol.FilesMove, protocol.FilesCopy:
		return f.transfer(env, req.Op, req.Path, req.To)
	}
	return protocol.FilesReply{}, protocol.Errorf(protocol.Invalid, "unknown file operation %q", req.Op)
}

// filesError maps a file-tool error to what a client is told.
func filesError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrEscape):
		return protocol.Errorf(protocol.Invalid, "Invalid path: %v", err).WithCode("PATH_TRAVERSAL")
	case errors.Is(err, fs.ErrNotExist):
		return protocol.Errorf(protocol.NotFound, "File not found")
	case errors.Is(err, fs.ErrExist):
		return protocol.Errorf(protocol.Conflict, "%v", err)
	}
	return protocol.Errorf(protocol.Invalid, "%v", err)
}

func entry(rel string, info fs.FileInfo) protocol.FileEntry {
	e := protocol.FileEntry{Name: info.Name(), Path: "/" + strings.TrimPrefix(rel, "./"),
		Type: "file", Size: info.Size(), ModifiedAt: protocol.Timestamp(info.ModTime().UTC())}
	if rel == "." {
		e.Path = "/"
	}
	if info.IsDir() {
		e.Type, e.Size = "directory", 0
	} else if t := mime.TypeByExtension(path.Ext(info.Name())); t != "" {
		e.MimeType = t
	} else {
		e.MimeType = "application/octet-stream"
	}
	return e
}

func (f Files) list(env Env, p string) (protocol.FilesReply, error) {
	ws, rel, err := openPath(env, p)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	defer ws.Close()
	ents, err := fs.ReadDir(ws.fsys, rel)
	if err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	out := protocol.FilesReply{Entries: []protocol.FileEntry{}}
	for _, d := range ents {
		if d.Type()&fs.ModeSymlink != 0 {
			// A link may lead outside: it is not offered for browsing.
			continue
		}
		info, err := d.Info()
		if err != nil {
			continue
		}
		out.Entries = append(out.Entries, entry(join(rel, d.Name()), info))
	}
	slices.SortFunc(out.Entries, func(a, b protocol.FileEntry) int {
		if a.Type != b.Type {
			return strings.Compare(a.Type, b.Type) // "directory" < "file": directories first
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func (f Files) read(env Env, p string) (protocol.FilesReply, error) {
	ws, rel, err := openPath(env, p)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	defer ws.Close()
	fh, err := ws.root.Open(rel)
	if err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	if info.IsDir() {
		return protocol.FilesReply{}, protocol.Errorf(protocol.Invalid, "%s is a directory", quote(rel))
	}
	if info.Size() > protocol.MaxFileTransfer {
		return protocol.FilesReply{}, protocol.Errorf(protocol.TooLarge, "File exceeds %dMB limit", protocol.MaxFileTransfer>>20)
	}
	data, err := io.ReadAll(io.LimitReader(fh, protocol.MaxFileTransfer+1))
	if err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	if len(data) > protocol.MaxFileTransfer {
		return protocol.FilesReply{}, protocol.Errorf(protocol.TooLarge, "File exceeds %dMB limit", protocol.MaxFileTransfer>>20)
	}
	e := entry(rel, info)
	return protocol.FilesReply{Entry: &e, Data: data}, nil
}

// write creates or replaces a file, creating its parent directories.
func (f Files) write(env Env, p string, data []byte) (protocol.FilesReply, error) {
	if len(data) > protocol.MaxFileTransfer {
		return protocol.FilesReply{}, protocol.Errorf(protocol.TooLarge, "File exceeds %dMB limit", protocol.MaxFileTransfer>>20)
	}
	rel, err := resolve(env.FilesDir, p)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	if rel == "." {
		return protocol.FilesReply{}, protocol.Errorf(protocol.Invalid, "a file name is required")
	}
	ws, err := openWorkspace(env)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	defer ws.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := ws.root.MkdirAll(dir, 0o700); err != nil {
			return protocol.FilesReply{}, filesError(fsError(dir, err))
		}
	}
	if err := ws.root.WriteFile(rel, data, 0o600); err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	return f.stat(ws, rel)
}

func (f Files) stat(ws *workspace, rel string) (protocol.FilesReply, error) {
	info, err := ws.root.Stat(rel)
	if err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	e := entry(rel, info)
	return protocol.FilesReply{Entry: &e}, nil
}

func (f Files) mkdir(env Env, p string) (protocol.FilesReply, error) {
	rel, err := resolve(env.FilesDir, p)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	ws, err := openWorkspace(env)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	defer ws.Close()
	if err := ws.root.MkdirAll(rel, 0o700); err != nil {
		return protocol.FilesReply{}, filesError(fsError(rel, err))
	}
	return f.stat(ws, rel)
}

func (f Files) remove(env Env, p string) error {
	ws, rel, err := openPath(env, p)
	if err != nil {
		return filesError(err)
	}
	defer ws.Close()
	if rel == "." {
		return protocol.Errorf(protocol.Invalid, "the workspace root cannot be deleted")
	}
	if _, err := ws.root.Lstat(rel); err != nil {
		return filesError(fsError(rel, err))
	}
	return filesError(fsError(rel, ws.root.RemoveAll(rel)))
}

// transfer moves or copies from to to (a directory is copied whole).
func (f Files) transfer(env Env, op, from, to string) (protocol.FilesReply, error) {
	src, err := resolve(env.FilesDir, from)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	dst, err := resolve(env.FilesDir, to)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	if src == "." || dst == "." {
		return protocol.FilesReply{}, protocol.Errorf(protocol.Invalid, "the workspace root cannot be moved or copied")
	}
	if dst == src || strings.HasPrefix(dst, src+"/") {
		return protocol.FilesReply{}, protocol.Errorf(protocol.Invalid, "cannot %s %s into itself", op, quote(src))
	}
	ws, err := openWorkspace(env)
	if err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	defer ws.Close()
	if _, err := ws.root.Lstat(dst); err == nil {
		return protocol.FilesReply{}, protocol.Errorf(protocol.Conflict, "%s already exists", quote(dst))
	}
	if dir := path.Dir(dst); dir != "." {
		if err := ws.root.MkdirAll(dir, 0o700); err != nil {
			return protocol.FilesReply{}, filesError(fsError(dir, err))
		}
	}
	if op == protocol.FilesMove {
		if err := ws.root.Rename(src, dst); err != nil {
			return protocol.FilesReply{}, filesError(fsError(src, err))
		}
		return f.stat(ws, dst)
	}
	if err := copyTree(ws, src, dst, 0); err != nil {
		return protocol.FilesReply{}, filesError(err)
	}
	return f.stat(ws, dst)
}

// maxCopyDepth bounds a directory copy's nesting.
const maxCopyDepth = 64

func copyTree(ws *workspace, src, dst string, depth int) error {
	if depth > maxCopyDepth {
		return fmt.Errorf("%s: nested too deep", quote(src))
	}
	info, err := ws.root.Lstat(src)
	if err != nil {
		return fsError(src, err)
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return nil // links are not followed or copied
	case info.IsDir():
		if err := ws.root.Mkdir(dst, 0o700); err != nil {
			return fsError(dst, err)
		}
		ents, err := fs.ReadDir(ws.fsys, src)
		if err != nil {
			return fsError(src, err)
		}
		for _, e := range ents {
			if err := copyTree(ws, join(src, e.Name()), join(dst, e.Name()), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	in, err := ws.root.Open(src)
	if err != nil {
		return fsError(src, err)
	}
	defer in.Close()
	out, err := ws.root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsError(dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fsError(dst, err)
	}
	return fsError(dst, out.Close())
}
