// Package jsonl keeps sessions as JSONL files under
// <data-dir>/workspaces/<ws>/sessions/<session>.jsonl with the write
// discipline of DESIGN.md §6: one writer per file at a time (appends and
// rewrites serialised), every append fsynced, rewrites through a temp file,
// fsync and rename, and a torn last line (a crash mid-append) ignored by
// readers and cut off by the next write.
package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// ErrNotFound is returned for a session file that does not exist.
var ErrNotFound = errors.New("jsonl: session not found")

// Store reads and writes session files. It is safe for concurrent use
// within one process; DESIGN §6 (and the distributed mode) keep a
// workspace's files to one store process.
type Store struct {
	dataDir string

	mu    sync.Mutex
	locks map[string]*fileLock
	// keys is the latest append keys of recently appended sessions
	// (AppendKeyed).
	keys keyCache
}

type fileLock struct {
	mu    sync.Mutex
	users int
}

// New returns a store rooted at dataDir.
func New(dataDir string) *Store {
	return &Store{dataDir: dataDir, locks: map[string]*fileLock{}}
}

// Path is the file of one session. Callers pass IDs that passed
// protocol.ValidID; Path refuses anything else so no caller can escape the
// data dir by mistake.
func (s *Store) Path(ws, session string) (string, error) {
	if !protocol.ValidID(ws) || !protocol.ValidID(session) {
		return "", fmt.Errorf("jsonl: invalid id %q/%q", ws, session)
	}
	return filepath.Join(s.SessionsDir(ws), session+".jsonl"), nil
}

// SessionsDir is the directory holding a workspace's session files.
func (s *Store) SessionsDir(ws string) string {
	return filepath.Join(s.dataDir, "workspaces", ws, "sessions")
}

func (s *Store) lock(path string) *fileLock {
	s.mu.Lock()
	l := s.locks[path]
	if l == nil {
		l = &fileLock{}
		s.locks[path] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return l
}

func (s *Store) unlock(path string, l *fileLock) {
	l.mu.Unlock()
	s.mu.Lock()
	l.users--
	if l.users == 0 {
		// Drop idle entries so the map does not grow with every session
		// ever touched.
		delete(s.locks, path)
	}
	s.mu.Unlock()
}

// NewMeta returns a fresh meta line value.
func NewMeta(title *string, now time.Time) protocol.SessionMeta {
	return protocol.SessionMeta{Type: "meta", Title: title, Created: protocol.Timestamp(now)}
}

// Append appends one JSON line to a session, creating the file with a meta
// line first when it does not exist. It returns once the data is fsynced.
func (s *Store) Append(ws, session string, line any) error {
	return s.AppendBatch(ws, session, line)
}

// AppendBatch appends several lines with one write and one fsync.
func (s *Store) AppendBatch(ws, session string, lines ...any) error {
	path, err := s.Path(ws, session)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, line := range lines {
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("jsonl: encode line for %s/%s: %w", ws, session, err)
		}
	}
	l := s.lock(path)
	defer s.unlock(path, l)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("jsonl: create sessions dir of %s: %w", ws, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("jsonl: open %s/%s: %w", ws, session, err)
	}
	defer f.Close()
	size, err := repairTail(f)
	if err != nil {
		return fmt.Errorf("jsonl: repair %s/%s: %w", ws, session, err)
	}
	payload := buf.Bytes()
	if size == 0 {
		meta, err := json.Marshal(NewMeta(nil, time.Now()))
		if err != nil {
			return fmt.Errorf("jsonl: encode meta: %w", err)
		}
		payload = append(append(meta, '\n'), payload...)
	}
	if err := writeTail(f, size, payload); err != nil {
		return fmt.Errorf("jsonl: append %s/%s: %w", ws, session, err)
	}
	return nil
}

// AppendFile appends payload, whole lines, to the JSONL file at path,
// creating it and its directory. A torn last line a crash left is cut
// first, a failed write is cut back, and the lines are fsynced (with the
// directory, for a new file) before it returns. Callers serialise the
// appends to one file.
func AppendFile(path string, payload []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("jsonl: create dir of %s: %w", filepath.Base(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("jsonl: open %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	size, err := repairTail(f)
	if err != nil {
		return fmt.Errorf("jsonl: repair %s: %w", filepath.Base(path), err)
	}
	if err := writeTail(f, size, payload); err != nil {
		return fmt.Errorf("jsonl: append %s: %w", filepath.Base(path), err)
	}
	return nil
}

// writeTail writes payload at size, f's repaired end, and fsyncs it.
func writeTail(f *os.File, size int64, payload []byte) error {
	if _, err := f.WriteAt(payload, size); err != nil {
		// A write cut short (ENOSPC, EIO) leaves part of a line: cut it
		// now, so the file never holds a torn line beyond the last, and a
		// reader never sees half a line the caller was told failed.
		cutTail(f, size)
		return err
	}
	if err := f.Sync(); err != nil {
		cutTail(f, size)
		return fmt.Errorf("fsync: %w", err)
	}
	if size == 0 {
		syncDir(filepath.Dir(f.Name()))
	}
	return nil
}

// cutTail truncates f back to size after a failed append. Truncating
// frees blocks, so it works on a full disk; should it fail anyway, the
// next append's repairTail cuts the torn line.
func cutTail(f *os.File, size int64) {
	if f.Truncate(size) == nil {
		_ = f.Sync()
	}
}

// repairTail returns the offset to append at, truncating a torn last line
// (bytes after the final '\n') left by a crash mid-write.
func repairTail(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if size == 0 {
		return 0, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return size, nil
	}
	// Find the last newline, scanning back in chunks.
	const chunk = 4096
	end := size
	buf := make([]byte, chunk)
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := start + int64(i) + 1
			return keep, f.Truncate(keep)
		}
		end = start
	}
	// No complete line at all: the file is one torn line (a torn meta line).
	return 0, f.Truncate(0)
}

// Read returns a session file's bytes and its modification time.
func (s *Store) Read(ws, session string) ([]byte, time.Time, error) {
	path, err := s.Path(ws, session)
	if err != nil {
		return nil, time.Time{}, err
	}
	return readFile(path)
}

func readFile(path string) ([]byte, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, time.Time{}, ErrNotFound
		}
		return nil, time.Time{}, fmt.Errorf("jsonl: open %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("jsonl: stat %s: %w", filepath.Base(path), err)
	}
	data := make([]byte, st.Size())
	n, err := io.ReadFull(f, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, time.Time{}, fmt.Errorf("jsonl: read %s: %w", filepath.Base(path), err)
	}
	return data[:n], st.ModTime(), nil
}

// Rewrite replaces a session file with fn's output, serialised with
// appends so no concurrently appended line is lost. fn sees the current
// content; returning nil data leaves the file untouched. A missing file is
// ErrNotFound unless create is true (then fn sees nil).
func (s *Store) Rewrite(ws, session string, create bool, fn func(data []byte) ([]byte, error)) error {
	_, _, err := s.rewrite(ws, session, create, false, fn)
	return err
}

// FileState is what identifies one version of a file for caches: its size
// and modification time.
type FileState struct {
	Size    int64
	ModTime time.Time
}

// RewriteQuiet is Rewrite (create false) for changes that are not session
// activity, such as a lazily written summary: the file keeps its
// modification time, so lastActive does not move. It reports whether it
// wrote and the file's state right after the write, taken under the lock.
func (s *Store) RewriteQuiet(ws, session string, fn func(data []byte) ([]byte, error)) (FileState, bool, error) {
	return s.rewrite(ws, session, false, true, fn)
}

func (s *Store) rewrite(ws, session string, create, keepMtime bool, fn func(data []byte) ([]byte, error)) (FileState, bool, error) {
	path, err := s.Path(ws, session)
	if err != nil {
		return FileState{}, false, err
	}
	l := s.lock(path)
	defer s.unlock(path, l)
	data, mtime, err := readFile(path)
	if errors.Is(err, ErrNotFound) && create {
		data, err = nil, nil
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return FileState{}, false, fmt.Errorf("jsonl: create sessions dir of %s: %w", ws, err)
		}
	}
	if err != nil {
		return FileState{}, false, err
	}
	out, err := fn(data)
	if err != nil || out == nil {
		return FileState{Size: int64(len(data)), ModTime: mtime}, false, err
	}
	if err := WriteFileAtomic(path, out); err != nil {
		return FileState{}, false, fmt.Errorf("jsonl: rewrite %s/%s: %w", ws, session, err)
	}
	if keepMtime && !mtime.IsZero() {
		if err := os.Chtimes(path, time.Now(), mtime); err != nil {
			return FileState{}, true, fmt.Errorf("jsonl: keep mtime of %s/%s: %w", ws, session, err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return FileState{}, true, fmt.Errorf("jsonl: stat %s/%s: %w", ws, session, err)
	}
	return FileState{Size: st.Size(), ModTime: st.ModTime()}, true, nil
}

// Delete removes a session file.
func (s *Store) Delete(ws, session string) error {
	path, err := s.Path(ws, session)
	if err != nil {
		return err
	}
	l := s.lock(path)
	defer s.unlock(path, l)
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ErrNotFound
		}
		return fmt.Errorf("jsonl: delete %s/%s: %w", ws, session, err)
	}
	syncDir(filepath.Dir(path))
	return nil
}

// WriteFileAtomic writes data to path through a temp file in the same
// directory: write, fsync, rename, fsync the directory. A crash leaves
// either the old or the new file, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// ToolLine is a tool event as stored: the event's fields behind
// "type":"tool".
type ToolLine struct {
	Type string `json:"type"`
	protocol.ToolEvent
	// AppendKey is the key it was appended under (AppendKeyed), if any.
	AppendKey string `json:"appendKey,omitempty"`
}

// NewToolLine returns the stored line of a tool event.
func NewToolLine(t protocol.ToolEvent) ToolLine { return ToolLine{Type: "tool", ToolEvent: t} }

// EncodeLine encodes one session line exactly as Append writes it, without
// the newline.
func EncodeLine(line any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(line); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// EncodeMeta encodes a fresh meta line (no title) as Append writes it for
// a new file, without the newline.
func EncodeMeta(now time.Time) ([]byte, error) { return json.Marshal(NewMeta(nil, now)) }
