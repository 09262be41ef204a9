package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrEscape is returned (wrapped) for a path that would leave the workspace:
// "..", an absolute symlink, or a symlink pointing outside FilesDir.
var ErrEscape = errors.New("path escapes the workspace")

var errNoFilesDir = errors.New("no workspace directory is configured")

// workspace is FilesDir opened as an os.Root for the duration of one call.
type workspace struct {
	root *os.Root
	fsys fs.FS
}

// openWorkspace creates FilesDir if needed and opens it as the root every
// file operation of the call goes through.
func openWorkspace(env Env) (*workspace, error) {
	if env.FilesDir == "" || !filepath.IsAbs(env.FilesDir) {
		return nil, errNoFilesDir
	}
	if err := os.MkdirAll(env.FilesDir, 0o700); err != nil {
		return nil, errors.New("the workspace directory cannot be created")
	}
	root, err := os.OpenRoot(env.FilesDir)
	if err != nil {
		return nil, errors.New("the workspace directory cannot be opened")
	}
	return &workspace{root: root, fsys: root.FS()}, nil
}

func (w *workspace) Close() error { return w.root.Close() }

// openPath resolves a model-supplied path (see resolve), then opens the
// workspace; the caller closes ws. Tools that must refuse a path before
// anything is created (write_file, generate_docx) resolve first instead.
func openPath(env Env, p string) (ws *workspace, rel string, err error) {
	rel, err = resolve(env.FilesDir, p)
	if err != nil {
		return nil, "", err
	}
	ws, err = openWorkspace(env)
	if err != nil {
		return nil, "", err
	}
	return ws, rel, nil
}

// resolve turns a model-supplied path into a clean slash-separated path
// relative to FilesDir ("." for FilesDir itself). It rejects lexical escapes
// up front so that nothing is touched; symlink escapes are caught by os.Root
// when the path is used.
func resolve(filesDir, p string) (string, error) {
	p = strings.TrimSpace(p)
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if p == "" || p == "~" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		// Models often echo an absolute path they saw earlier; one inside
		// FilesDir means what it says. Any other is read as rooted at
		// FilesDir, never at the host root.
		if rel, err := filepath.Rel(filesDir, p); err == nil && filepath.IsLocal(rel) {
			p = rel
		} else {
			p = strings.TrimLeft(filepath.ToSlash(p), "/")
		}
	}
	clean := path.Clean(filepath.ToSlash(p))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%s: %w", quote(p), ErrEscape)
	}
	if clean == "" {
		clean = "."
	}
	return clean, nil
}

// quote renders a path for a message; "." reads better as the workspace root.
func quote(rel string) string {
	if rel == "." || rel == "" {
		return "the workspace root"
	}
	return fmt.Sprintf("%q", rel)
}

// fsError rewrites a filesystem error into a plain message naming only the
// workspace-relative path, keeping fs.ErrNotExist and friends matchable.
func fsError(rel string, err error) error {
	if err == nil {
		return nil
	}
	if isEscape(err) {
		return fmt.Errorf("%s: %w", quote(rel), ErrEscape)
	}
	for _, target := range []error{fs.ErrNotExist, fs.ErrExist, fs.ErrPermission} {
		if errors.Is(err, target) {
			return fmt.Errorf("%s: %w", quote(rel), target)
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", quote(rel), pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %v", quote(rel), le.Err)
	}
	return fmt.Errorf("%s: %v", quote(rel), err)
}

// isEscape recognises os.Root's refusal, whose sentinel is not exported.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" || errors.Is(e, ErrEscape) {
			return true
		}
	}
	return false
}

// join appends a slash-separated child to a workspace-relative directory.
func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}
