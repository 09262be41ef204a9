// Package private keeps Waggle's data dir to the user who runs it: chats,
// memories and API keys must not be readable by other local users.
// Writers create directories with DirMode and files with FileMode; at
// start the composition root makes the data dir DirMode and Tighten takes
// group and other access away from whatever an older version (or a copy
// or restore) left in it.
package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DirMode is the mode of every directory Waggle creates in its data dir.
const DirMode fs.FileMode = 0o700

// FileMode is the mode of every file Waggle creates in its data dir.
const FileMode fs.FileMode = 0o600

// MkdirAll creates dir and its missing parents with DirMode, and makes
// dir itself DirMode if it already existed with more.
func MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if info.Mode().Perm()&^DirMode != 0 {
		if err := os.Chmod(dir, info.Mode().Perm()&DirMode|DirMode); err != nil {
			return err
		}
	}
	return nil
}

// Tighten walks root and removes group and other permission bits from
// root and everything under it, keeping the owner's (an executable stays
// executable for its owner; a directory gets at least DirMode so it can
// still be walked). Symbolic links are neither followed nor changed: the
// files they point at are not the data dir's. It returns how many entries
// it changed, and every failure joined (the walk goes on past them).
func Tighten(root string) (changed int, err error) {
	var errs []error
	walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 || !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed while we walked
				errs = append(errs, err)
			}
			return nil
		}
		perm := info.Mode().Perm()
		want := perm &^ 0o077
		if d.IsDir() {
			want |= DirMode
		}
		if want == perm {
			return nil
		}
		if err := os.Chmod(path, want); err != nil {
			errs = append(errs, err)
			return nil
		}
		changed++
		return nil
	})
	if walkErr != nil {
		errs = append(errs, walkErr)
	}
	if len(errs) > 0 {
		return changed, fmt.Errorf("private: tighten %s: %w", root, errors.Join(errs...))
	}
	return changed, nil
}
