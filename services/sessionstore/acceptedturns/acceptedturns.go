// Package acceptedturns is the session store's journal of turns accepted
// and not yet answered (libs/protocol/acceptedturns.go is the contract):
// an append-only JSONL file, <data-dir>/turns/accepted.jsonl, of
//
//	{"op":"open","request":{…},"place":…,"accepted":…}
//	{"op":"close","turn":"<turn id>"}
//
// records, and in memory the open turns it describes, loaded at start. A
// runner whose coordination state NATS may lose in a crash rebuilds it from
// here after a full restart.
//
// Durability is the caller's choice per record: an open record written
// with the turn's user message is fsynced by a Sync beside that line's
// own fsync; a turn recorded on its own is fsynced at once. Close does not
// fsync: a reply's close lost in a crash leaves a turn open whose reply is
// in its session's history, and the store's OpenTurns closes it then (the
// store syncs the closes of turns that ended without a reply).
package acceptedturns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/waggle-os/core/libs/private"
	"github.com/waggle-os/core/libs/protocol"
)

// Compaction bounds: the file is rewritten with the open records only
// once it holds more than compactMinLines lines and more than
// compactRatio lines per open turn. After a rewrite the file holds the
// open turns alone, so the next one is at least compactMinLines writes
// away: a few hundred bytes per turn, rewritten rarely.
const (
	compactMinLines = 1000
	compactRatio    = 4
)

// Ops of the journal's lines.
const (
	opOpen  = "open"
	opClose = "close"
)

// ErrNotOpen is returned by the journal's methods before OpenFile or after
// CloseFile.
var ErrNotOpen = errors.New("acceptedturns: journal is not open")

// line is one record of the file. An open record carries the turn; a
// close record its id only (the embedded pointer is nil, so none of the
// turn's fields are written).
type line struct {
	Op   string `json:"op"`
	Turn string `json:"turn,omitempty"`
	*protocol.AcceptedTurn
}

// Journal is the journal of accepted turns. It is safe for concurrent use;
// one process writes a file (the store's data dir has one writer).
type Journal struct {
	path string

	mu   sync.Mutex
	f    *os.File // nil before OpenFile and after CloseFile
	open map[string]protocol.AcceptedTurn
	// lines counts the file's records (compaction's measure).
	lines int
	// size is the file's length: a write cut short is truncated back to
	// it.
	size int64
	// written and synced number the writes; the file has unsynced data
	// while synced < written.
	written, synced uint64
	// syncMu lets one fsync run at a time: the Syncs waiting behind it
	// find theirs covered by the next one.
	syncMu sync.Mutex
}

// New returns a journal kept at <dataDir>/turns/accepted.jsonl. It touches
// nothing until OpenFile.
func New(dataDir string) *Journal {
	return &Journal{path: Path(dataDir)}
}

// Path is the journal file under dataDir.
func Path(dataDir string) string {
	return filepath.Join(dataDir, "turns", "accepted.jsonl")
}

// OpenFile opens (or creates) the file and loads its open turns. A torn
// last line — a crash in the middle of a write — is cut; lines that are
// not records are skipped. A file with many more lines than open turns is
// compacted.
func (j *Journal) OpenFile() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		return errors.New("acceptedturns: journal already open")
	}
	if err := private.MkdirAll(filepath.Dir(j.path)); err != nil {
		return fmt.Errorf("acceptedturns: create dir: %w", err)
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE, private.FileMode)
	if err != nil {
		return fmt.Errorf("acceptedturns: open: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("acceptedturns: read: %w", err)
	}
	keep := bytes.LastIndexByte(data, '\n') + 1
	if keep < len(data) {
		// The torn line's write was never fsynced, so never acknowledged
		// as durable: nothing it said was promised.
		if err := f.Truncate(int64(keep)); err != nil {
			f.Close()
			return fmt.Errorf("acceptedturns: cut torn line: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("acceptedturns: fsync: %w", err)
		}
	}
	j.f, j.size = f, int64(keep)
	j.open, j.lines = load(data[:keep])
	j.written, j.synced = 0, 0
	if j.needsCompaction() {
		if err := j.compact(); err != nil {
			j.f.Close()
			j.f = nil
			return err
		}
	}
	return nil
}

// load replays the file's complete lines into the open set; it returns
// the set and the number of lines.
func load(data []byte) (map[string]protocol.AcceptedTurn, int) {
	open := map[string]protocol.AcceptedTurn{}
	n := 0
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		raw := data[:i]
		data = data[i+1:]
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		n++
		var l line
		if json.Unmarshal(raw, &l) != nil {
			continue // damaged: skipped, and dropped by the next compaction
		}
		switch {
		case l.Op == opOpen && l.AcceptedTurn != nil && l.Request.TurnID != "":
			if _, ok := open[l.Request.TurnID]; !ok {
				open[l.Request.TurnID] = *l.AcceptedTurn
			}
		case l.Op == opClose && l.Turn != "":
			delete(open, l.Turn)
		}
	}
	return open, n
}

// CloseFile fsyncs and closes the file; the journal can be opened again.
func (j *Journal) CloseFile() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	if err != nil {
		return fmt.Errorf("acceptedturns: close: %w", err)
	}
	return nil
}

// Record writes rec's open record, fsynced when sync is set. A turn
// already open keeps its first record (Place and Accepted included) and
// nothing new is written; sync then still makes that record durable.
func (j *Journal) Record(rec protocol.AcceptedTurn, sync bool) error {
	id := rec.Request.TurnID
	if id == "" {
		return errors.New("acceptedturns: record without a turn id")
	}
	j.mu.Lock()
	if j.f == nil {
		j.mu.Unlock()
		return ErrNotOpen
	}
	if _, ok := j.open[id]; !ok {
		if err := j.write(line{Op: opOpen, AcceptedTurn: &rec}); err != nil {
			j.mu.Unlock()
			return err
		}
		j.open[id] = rec
	}
	j.mu.Unlock()
	if sync {
		return j.Sync()
	}
	return nil
}

// Sync fsyncs what was written so far. It finds nothing to do when no
// record was written since the last Sync. The fsync runs outside the
// journal's lock, so other turns' records are not held up behind it, and
// the Syncs that wait behind one fsync share the next (group commit).
func (j *Journal) Sync() error {
	j.mu.Lock()
	upto, open := j.written, j.f != nil
	done := j.synced >= upto
	j.mu.Unlock()
	if !open {
		return ErrNotOpen
	}
	if done {
		return nil
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	f, covers := j.f, j.written
	done = j.synced >= upto
	j.mu.Unlock()
	if done {
		return nil // the fsync this one waited behind covered it
	}
	if f == nil {
		return ErrNotOpen
	}
	err := f.Sync()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil && j.f == f {
		return fmt.Errorf("acceptedturns: fsync: %w", err)
	}
	// A compaction that replaced the file meanwhile wrote and fsynced
	// every open record (its own synced covers covers).
	j.synced = max(j.synced, covers)
	return nil
}

// Close writes turnID's close record (no fsync). A turn that is not open
// writes nothing.
func (j *Journal) Close(turnID string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return ErrNotOpen
	}
	if _, ok := j.open[turnID]; !ok {
		return nil
	}
	if err := j.write(line{Op: opClose, Turn: turnID}); err != nil {
		return err
	}
	delete(j.open, turnID)
	if j.needsCompaction() {
		return j.compact()
	}
	return nil
}

// Lookup returns turnID's open record.
func (j *Journal) Lookup(turnID string) (protocol.AcceptedTurn, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec, ok := j.open[turnID]
	return rec, ok
}

// Open returns the open records, in no order.
func (j *Journal) Open() []protocol.AcceptedTurn {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]protocol.AcceptedTurn, 0, len(j.open))
	for _, rec := range j.open {
		out = append(out, rec)
	}
	return out
}

// write appends one record; j.mu is held. A write cut short is truncated
// back, so the file never holds a torn line before a good one.
func (j *Journal) write(l line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("acceptedturns: encode: %w", err)
	}
	b = append(b, '\n')
	if _, err := j.f.WriteAt(b, j.size); err != nil {
		_ = j.f.Truncate(j.size)
		return fmt.Errorf("acceptedturns: write: %w", err)
	}
	j.size += int64(len(b))
	j.lines++
	j.written++
	return nil
}

func (j *Journal) needsCompaction() bool {
	return j.lines > compactMinLines && j.lines > compactRatio*len(j.open)
}

// compact rewrites the file with the open records only (temp file, fsync,
// rename, fsync of the directory) and appends to the new file from then
// on; j.mu is held. A crash leaves the old file or the new one.
func (j *Journal) compact() error {
	var buf bytes.Buffer
	for _, rec := range j.open {
		b, err := json.Marshal(line{Op: opOpen, AcceptedTurn: &rec})
		if err != nil {
			return fmt.Errorf("acceptedturns: encode: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	dir := filepath.Dir(j.path)
	tmp, err := os.CreateTemp(dir, ".accepted.jsonl.tmp-*") // 0600
	if err != nil {
		return fmt.Errorf("acceptedturns: compact: %w", err)
	}
	if err := writeSynced(tmp, buf.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("acceptedturns: compact: %w", err)
	}
	if err := os.Rename(tmp.Name(), j.path); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("acceptedturns: compact: %w", err)
	}
	syncDir(dir)
	// The temp file's descriptor is the new file's: appends go on there.
	j.f.Close()
	j.f, j.size, j.lines = tmp, int64(buf.Len()), len(j.open)
	j.synced = j.written
	return nil
}

func writeSynced(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
