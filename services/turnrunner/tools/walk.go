package tools

import (
	"context"
	"errors"
	"io/fs"
)

// errStopWalk ends a walk early once a cap is reached.
var errStopWalk = errors.New("stop walk")

// skipDirs are not descended into by recursive tools: version-control
// internals swamp every listing and search and are never what is asked for.
var skipDirs = map[string]bool{".git": true, ".hg": true, ".svn": true}

// walk visits the tree under dir (workspace-relative), calling fn for every
// entry but dir itself, honouring ctx. Unreadable subdirectories are skipped
// rather than failing the whole call.
func walk(ctx context.Context, fsys fs.FS, dir string, fn func(rel string, d fs.DirEntry) error) error {
	err := fs.WalkDir(fsys, dir, func(rel string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if rel == dir {
				return err
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if rel == dir {
			return nil
		}
		if err := fn(rel, d); err != nil {
			return err
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return fs.SkipDir
		}
		return nil
	})
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}
