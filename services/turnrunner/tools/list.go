package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ---- list_files ----

type listFilesTool struct{ cfg Config }

func (listFilesTool) Name() string { return "list_files" }

func (t listFilesTool) Description() string {
	return fmt.Sprintf("List the files and directories in a workspace directory (default: the workspace root). "+
		"Directories end with /. Paths are shown relative to the workspace root. With recursive=true the whole "+
		"tree below the directory is listed (.git is not descended into). At most %d entries are returned.", t.cfg.ListLimit)
}

func (listFilesTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"Directory relative to the workspace root (default: the root)"},` +
		`"recursive":{"type":"boolean","description":"List the whole tree below the directory (default false)"}` +
		`},"required":[]}`)
}

// listFilesInput is list_files' arguments.
type listFilesInput struct {
	Path      string  `json:"path,omitempty"`
	Recursive boolArg `json:"recursive,omitempty"`
}

func (t listFilesTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (t listFilesTool) run(ctx context.Context, env Env, in *listFilesInput) (string, error) {
	ws, rel, err := openDir(env, in.Path)
	if err != nil {
		return "", err
	}
	defer ws.Close()

	limit := t.cfg.ListLimit
	var lines []string
	truncated := false
	add := func(name string, isDir bool) error {
		if len(lines) == limit {
			truncated = true
			return errStopWalk
		}
		if isDir {
			name += "/"
		}
		lines = append(lines, name)
		return nil
	}
	if in.Recursive {
		err = walk(ctx, ws.fsys, rel, func(p string, d fs.DirEntry) error { return add(p, d.IsDir()) })
	} else {
		var entries []fs.DirEntry
		entries, err = fs.ReadDir(ws.fsys, rel) // sorted by name
		for _, d := range entries {
			if add(join(rel, d.Name()), d.IsDir()) != nil {
				break
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fsError(rel, err)
	}
	if len(lines) == 0 {
		return "(empty directory)", nil
	}
	out := strings.Join(lines, "\n")
	if truncated {
		out += fmt.Sprintf("\n\n[truncated: showing the first %d entries; list a subdirectory to see more]", limit)
	}
	return out, nil
}

// openDir is openPath for a path that must be a directory.
func openDir(env Env, p string) (*workspace, string, error) {
	ws, rel, err := openPath(env, p)
	if err != nil {
		return nil, "", err
	}
	if err := requireDir(ws, rel); err != nil {
		ws.Close()
		return nil, "", err
	}
	return ws, rel, nil
}

// requireDir checks rel is a directory, so that a file or a missing path
// gets a clear message instead of an empty listing.
func requireDir(ws *workspace, rel string) error {
	info, err := ws.root.Stat(rel)
	if err != nil {
		return fsError(rel, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is a file, not a directory", quote(rel))
	}
	return nil
}

// ---- search_files ----

type searchFilesTool struct{ cfg Config }

func (searchFilesTool) Name() string { return "search_files" }

func (t searchFilesTool) Description() string {
	return fmt.Sprintf("Find files in the workspace whose path matches a glob pattern. Supports * and ? within a "+
		"path segment, ** for any number of directories, and {a,b} alternatives, e.g. \"**/*.md\", "+
		"\"src/**/*.{ts,tsx}\". A pattern without / matches file names at any depth (\"*.go\"). The pattern is "+
		"matched against paths relative to path (default: the workspace root); results are relative to the "+
		"workspace root, directories end with /. At most %d results are returned.", t.cfg.SearchLimit)
}

func (searchFilesTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"Glob pattern, e.g. **/*.md"},` +
		`"path":{"type":"string","description":"Directory to search in, relative to the workspace root (default: the root)"}` +
		`},"required":["pattern"]}`)
}

// searchFilesInput is search_files' arguments.
type searchFilesInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
}

func (in *searchFilesInput) validate() error {
	if strings.TrimSpace(in.Pattern) == "" {
		return errors.New("pattern is required")
	}
	return nil
}

func (t searchFilesTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (t searchFilesTool) run(ctx context.Context, env Env, in *searchFilesInput) (string, error) {
	g, err := compileGlob(in.Pattern)
	if err != nil {
		return "", err
	}
	ws, rel, err := openDir(env, in.Path)
	if err != nil {
		return "", err
	}
	defer ws.Close()

	limit := t.cfg.SearchLimit
	var hits []string
	truncated := false
	err = walk(ctx, ws.fsys, rel, func(p string, d fs.DirEntry) error {
		if !g.match(relativeTo(rel, p)) {
			return nil
		}
		if len(hits) == limit {
			truncated = true
			return errStopWalk
		}
		if d.IsDir() {
			p += "/"
		}
		hits = append(hits, p)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fsError(rel, err)
	}
	if len(hits) == 0 {
		return fmt.Sprintf("No files match %q.", in.Pattern), nil
	}
	out := strings.Join(hits, "\n")
	if truncated {
		out += fmt.Sprintf("\n\n[truncated: showing the first %d matches; narrow the pattern or path to see more]", limit)
	}
	return out, nil
}

// relativeTo strips the search directory from a workspace-relative path.
func relativeTo(dir, p string) string {
	if dir == "." {
		return p
	}
	return strings.TrimPrefix(p, dir+"/")
}
