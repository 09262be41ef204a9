// Package sessions implements the sessions API (contract §6) over the
// session files: listing, search, export, timeline, create, rename, delete
// and the post-session summary, including the lazy summary write-back.
//
// Listing a workspace with thousands of sessions stays fast because each
// session's listing entry is cached, keyed by the file's size and
// modification time: a listing stats every file but parses only the ones
// that changed (in parallel). The store's own writes also invalidate the
// entry explicitly, so coarse file-system timestamps cannot serve a stale
// entry. Workspace Now lists the sessions on every model turn, where a
// stat per session is too much: ListIndexed trusts the index instead,
// reloading only what the store wrote since; when the directory changed
// (a file created, removed or renamed) it reads the names and loads only
// the new files, and it stats every file once Config.Rescan passed. Search cannot be cached that way (it reads message text), so it
// reads files in parallel, decodes only the lines whose raw bytes may hold
// the query (transcript.SearchData), and fully reads only the sessions that
// make the result page.
package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/transcript"
)

// Search bounds of the contract.
const (
	// MinQueryLength is the shortest query, in UTF-16 units.
	MinQueryLength = 2
	// DefaultSearchLimit applies when a search names no limit.
	DefaultSearchLimit = 20
	// MaxSearchLimit caps a search's results.
	MaxSearchLimit = 50
)

// Errors with their HTTP kind and the contract's exact texts.
var (
	ErrWorkspaceNotFound = &protocol.Error{Kind: protocol.NotFound, Message: "Workspace not found"}
	ErrSessionNotFound   = &protocol.Error{Kind: protocol.NotFound, Message: "Session not found"}
	ErrQueryTooShort     = &protocol.Error{Kind: protocol.Invalid, Message: "Query must be at least 2 characters"}
	ErrTitleRequired     = &protocol.Error{Kind: protocol.Invalid, Message: "title is required"}
)

// Workspaces is what the store needs to know about workspaces.
type Workspaces interface {
	// Exists reports whether a workspace's config exists.
	Exists(id string) bool
	// Root is the directory holding every workspace directory.
	Root() string
}

// Config configures the store.
type Config struct {
	// Location renders export dates and times. Default: time.Local.
	Location *time.Location
	// Workers bounds the files read and parsed at once by one listing or
	// search. Default: 2 × GOMAXPROCS.
	Workers int
	// Logger reports failed lazy summary write-backs. Default: slog.Default().
	Logger *slog.Logger
	// Rescan is how long ListIndexed trusts the index (the store's own
	// writes and the directory's modification time) before it stats every
	// file again. Default: DefaultRescan.
	Rescan time.Duration
}

// DefaultRescan bounds how long ListIndexed can miss a session file another
// process changed (the store's own writes are seen at once).
const DefaultRescan = 2 * time.Second

// Validate fills defaults.
func (c *Config) Validate() error {
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.Workers <= 0 {
		c.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Rescan <= 0 {
		c.Rescan = DefaultRescan
	}
	return nil
}

// Catalog serves the sessions API from a catalog of the session files:
// each session's listing entry (title, summary, counts), cached while its
// file is unchanged, and the listing, search and export built from them.
type Catalog struct {
	cfg   Config
	files *jsonl.Store
	wss   Workspaces
	now   func() time.Time

	mu    sync.Mutex
	index map[string]*wsIndex
}

// wsIndex is the cached listing of one workspace.
type wsIndex struct {
	entries map[string]entry
	// stale holds the sessions written since their entry was read (or
	// created since the last scan), each with the write's sequence number:
	// a listing that read a file before that write must not store its
	// entry.
	stale map[string]uint64
	seq   uint64
	// scanned is when the last full scan began (zero: never); dirMod is
	// the sessions directory's modification time the index accounts for.
	scanned time.Time
	dirMod  time.Time
}

// entry is a cached listing entry, valid while the file has this state.
type entry struct {
	state jsonl.FileState
	info  protocol.SessionInfo
}

// New returns a store over files. cfg is validated (defaults filled).
func New(files *jsonl.Store, wss Workspaces, cfg Config) *Catalog {
	_ = cfg.Validate()
	return &Catalog{cfg: cfg, files: files, wss: wss, now: time.Now, index: map[string]*wsIndex{}}
}

// Invalidate drops the cached entry of a session; every write to a session
// file goes through here, after the write. The directory's modification
// time is taken as accounted for: a write that created the file changed
// it.
func (s *Catalog) Invalidate(ws, session string) {
	mod, modErr := s.dirMod(ws)
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.index[ws]
	if idx == nil {
		return
	}
	idx.seq++
	idx.stale[session] = idx.seq
	delete(idx.entries, session)
	if modErr == nil {
		idx.dirMod = mod
	} else {
		idx.scanned = time.Time{}
	}
}

// dirMod is the modification time of a workspace's sessions directory.
func (s *Catalog) dirMod(ws string) (time.Time, error) {
	fi, err := os.Stat(s.files.SessionsDir(ws))
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// ForgetWorkspace drops every cached entry of a workspace.
func (s *Catalog) ForgetWorkspace(ws string) {
	s.mu.Lock()
	delete(s.index, ws)
	s.mu.Unlock()
}

// sessionFile is one *.jsonl file of a listing.
type sessionFile struct {
	id    string
	state jsonl.FileState
}

// files lists a workspace's session files in name order. Files whose name
// is not a valid session id are skipped: no route could address them.
func (s *Catalog) sessionFiles(ws string) ([]sessionFile, error) {
	return s.listFiles(ws, true)
}

// listFiles is sessionFiles; without stat, states are left zero (a search
// takes the mtime from its own read and saves one system call per file).
func (s *Catalog) listFiles(ws string, stat bool) ([]sessionFile, error) {
	ents, err := os.ReadDir(s.files.SessionsDir(ws))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: list %s: %w", ws, err)
	}
	out := make([]sessionFile, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".jsonl") || e.IsDir() {
			continue
		}
		id := strings.Replace(name, ".jsonl", "", 1)
		if !protocol.ValidID(id) {
			continue
		}
		f := sessionFile{id: id}
		if stat {
			fi, err := e.Info()
			if err != nil {
				continue // removed since ReadDir
			}
			f.state = jsonl.FileState{Size: fi.Size(), ModTime: fi.ModTime()}
		}
		out = append(out, f)
	}
	return out, nil
}

// List returns a workspace's listing entries, most recently active first
// (ties by id). An unknown workspace lists as empty. Sessions with at
// least 4 messages and no summary get one generated and written back.
// Every file is checked, so an edit behind the store's back shows at once.
func (s *Catalog) List(ctx context.Context, ws string, hideEmpty bool) ([]protocol.SessionInfo, error) {
	return s.list(ctx, ws, hideEmpty, false)
}

// ListIndexed is List from the index: only the sessions the store wrote
// since the last listing are read, a changed sessions directory costs a
// read of its names (new files are loaded), and no file is stat-ed until
// Config.Rescan passed, so an in-place edit another process made can go
// unseen that long.
func (s *Catalog) ListIndexed(ctx context.Context, ws string, hideEmpty bool) ([]protocol.SessionInfo, error) {
	return s.list(ctx, ws, hideEmpty, true)
}

func (s *Catalog) list(ctx context.Context, ws string, hideEmpty, trust bool) ([]protocol.SessionInfo, error) {
	if !s.wss.Exists(ws) {
		return []protocol.SessionInfo{}, nil
	}
	mod, err := s.dirMod(ws)
	if errors.Is(err, fs.ErrNotExist) {
		return []protocol.SessionInfo{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: list %s: %w", ws, err)
	}
	var (
		files    []sessionFile
		infos    []protocol.SessionInfo
		ok       []bool
		misses   []int
		startSeq uint64
	)
	now := s.now()
	s.mu.Lock()
	idx := s.index[ws]
	mode := scanFiles
	if trust && idx != nil && !idx.scanned.IsZero() && now.Sub(idx.scanned) < s.cfg.Rescan {
		mode = scanNames
		if idx.dirMod.Equal(mod) {
			mode = scanIndex
		}
	}
	if idx != nil {
		startSeq = idx.seq
	}
	if mode == scanIndex {
		// Only what the store wrote since is read again.
		files = make([]sessionFile, 0, len(idx.entries)+len(idx.stale))
		for id, e := range idx.entries {
			files = append(files, sessionFile{id: id})
			infos, ok = append(infos, e.info), append(ok, true)
		}
		for id := range idx.stale {
			misses = append(misses, len(files))
			files = append(files, sessionFile{id: id})
			infos, ok = append(infos, protocol.SessionInfo{}), append(ok, false)
		}
	}
	s.mu.Unlock()
	if mode != scanIndex {
		// A changed directory means files were created, removed or
		// renamed (appends in place do not change it): within Rescan,
		// the names tell which, and only new or rewritten files are read.
		if files, err = s.listFiles(ws, mode == scanFiles); err != nil {
			return nil, err
		}
		infos, ok = make([]protocol.SessionInfo, len(files)), make([]bool, len(files))
		s.mu.Lock()
		var cached map[string]entry
		var stale map[string]uint64
		if idx != nil {
			cached, stale = idx.entries, idx.stale
		}
		for i, f := range files {
			e, hit := cached[f.id]
			if mode == scanNames {
				_, written := stale[f.id]
				hit = hit && !written
			} else {
				hit = hit && e.state == f.state
			}
			if hit {
				infos[i], ok[i] = e.info, true
			} else {
				misses = append(misses, i)
			}
		}
		s.mu.Unlock()
	}

	fresh := make([]entry, len(files))
	err = parallel(ctx, s.cfg.Workers, len(misses), func(k int) error {
		i := misses[k]
		e, err := s.load(ws, files[i].id)
		if errors.Is(err, jsonl.ErrNotFound) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			// An unreadable file is left out, as the original did.
			s.cfg.Logger.Warn("session unreadable", "workspace", ws, "session", files[i].id, "err", err)
			return nil
		}
		infos[i], ok[i], fresh[i] = e.info, true, e
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.remember(ws, files, ok, fresh, startSeq, mode, now, mod)

	out := make([]protocol.SessionInfo, 0, len(files))
	for i := range files {
		if !ok[i] || hideEmpty && infos[i].MessageCount == 0 {
			continue
		}
		out = append(out, infos[i])
	}
	slices.SortFunc(out, func(a, b protocol.SessionInfo) int {
		if c := strings.Compare(b.LastActive, a.LastActive); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// listMode is how much of the file system a listing checks.
type listMode int

const (
	// scanFiles stats every file: a full scan.
	scanFiles listMode = iota
	// scanNames reads the directory's names only: the index is fresh but
	// files were created, removed or renamed since.
	scanNames
	// scanIndex trusts the index and reads only what the store wrote.
	scanIndex
)

// remember stores what a listing read in the workspace's index. An entry
// the store wrote since the listing began stays stale; a listing that read
// the directory drops the entries of files that are gone, and a full scan
// also records when it began.
func (s *Catalog) remember(ws string, files []sessionFile, ok []bool, fresh []entry, startSeq uint64, mode listMode, began, mod time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.index[ws]
	if idx == nil {
		idx = &wsIndex{entries: map[string]entry{}, stale: map[string]uint64{}}
		s.index[ws] = idx
	}
	if mode != scanIndex {
		next := make(map[string]entry, len(files))
		for i, f := range files {
			if e, hit := idx.entries[f.id]; hit && ok[i] && fresh[i].state.ModTime.IsZero() {
				next[f.id] = e
			}
		}
		idx.entries = next
		idx.dirMod = mod
	}
	if mode == scanFiles {
		// Writes the scan may have missed stay stale; older ones are in it.
		for id, seq := range idx.stale {
			if seq <= startSeq {
				delete(idx.stale, id)
			}
		}
		idx.scanned = began
	}
	for i, f := range files {
		if idx.stale[f.id] > startSeq {
			continue
		}
		switch {
		case !fresh[i].state.ModTime.IsZero():
			idx.entries[f.id] = fresh[i]
			delete(idx.stale, f.id)
		case mode != scanFiles && !ok[i]:
			delete(idx.stale, f.id) // gone, or unreadable until written again
		}
	}
}

// load reads one session and builds its listing entry, writing a lazily
// generated summary back first when one is due. Only a session that needs
// a summary is fully parsed.
func (s *Catalog) load(ws, id string) (entry, error) {
	data, mtime, err := s.files.Read(ws, id)
	if err != nil {
		return entry{}, err
	}
	e := entry{state: jsonl.FileState{Size: int64(len(data)), ModTime: mtime}, info: transcript.QuickInfo(id, data, mtime)}
	if e.info.Summary != nil || e.info.MessageCount < 4 {
		return e, nil
	}
	summary, ok := transcript.GenerateSummary(transcript.Parse(data))
	if !ok {
		return e, nil
	}
	e.info.Summary = &summary
	if we, wrote, err := s.writeSummary(ws, id, mtime); err != nil {
		s.cfg.Logger.Warn("lazy summary write-back failed", "workspace", ws, "session", id, "err", err)
	} else if wrote {
		return we, nil
	}
	return e, nil
}

// writeSummary writes a generated summary into the meta line without
// moving the file's mtime (a summary is not activity). It regenerates the
// summary from the file as it is under the lock, so lines appended since
// the caller read it are both kept and counted. The returned entry
// describes exactly the written file.
func (s *Catalog) writeSummary(ws, id string, fallbackCreated time.Time) (entry, bool, error) {
	var e entry
	st, wrote, err := s.files.RewriteQuiet(ws, id, func(data []byte) ([]byte, error) {
		f := transcript.Parse(data)
		if f.Meta != nil && f.Meta.Summary != nil {
			return nil, nil // someone else wrote one meanwhile
		}
		summary, ok := transcript.GenerateSummary(f)
		if !ok {
			return nil, nil
		}
		out := transcript.WithSummary(data, summary, fallbackCreated)
		e.info = transcript.SessionInfo(id, transcript.Parse(out), time.Time{})
		return out, nil
	})
	if err != nil || !wrote {
		return entry{}, false, err
	}
	e.state = st
	e.info.LastActive = protocol.Timestamp(st.ModTime)
	if e.info.Created == protocol.Timestamp(time.Time{}) {
		e.info.Created = e.info.LastActive
	}
	return e, true, nil
}

// Digests lists ws's sessions last modified at or after since, in name
// order, with the summary a listing would show; a due summary is
// generated but, unlike the listing's, not written back (the memory
// lifecycle reads sessions without touching them).
func (s *Catalog) Digests(ctx context.Context, ws string, since time.Time) ([]protocol.SessionInfo, error) {
	files, err := s.sessionFiles(ws)
	if err != nil {
		return nil, err
	}
	var out []protocol.SessionInfo
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if f.state.ModTime.Before(since) {
			continue
		}
		data, mtime, err := s.files.Read(ws, f.id)
		if errors.Is(err, jsonl.ErrNotFound) {
			continue // deleted since the directory was read
		}
		if err != nil {
			return nil, fmt.Errorf("sessions: digest %s/%s: %w", ws, f.id, err)
		}
		out = append(out, transcript.Digest(f.id, data, mtime))
	}
	return out, nil
}

// Search finds q (case-insensitively) in a workspace's session summaries
// and first 50 message lines. Results are sorted by match count, then by
// lastActive, both descending, and only then cut to limit (the original
// cut before sorting and so could drop the best matches).
func (s *Catalog) Search(ctx context.Context, ws, q string, limit int) ([]protocol.SessionSearchResult, error) {
	if !s.wss.Exists(ws) {
		return nil, ErrWorkspaceNotFound
	}
	if err := CheckQuery(q); err != nil {
		return nil, err
	}
	limit = SearchLimit(limit)
	files, err := s.listFiles(ws, false)
	if err != nil {
		return nil, err
	}
	// Phase one counts hits in every file, decoding only lines that can
	// matter; phase two fully reads just the results that survive the
	// limit, for their titles and summaries.
	type hit struct {
		id       string
		count    int
		snippets []transcript.Snippet
		mtime    time.Time
	}
	hits := make([]*hit, len(files))
	err = parallel(ctx, s.cfg.Workers, len(files), func(i int) error {
		data, mtime, err := s.files.Read(ws, files[i].id)
		if err != nil {
			return nil // deleted or unreadable: not a match
		}
		if count, snippets := transcript.SearchData(data, q); count > 0 {
			hits[i] = &hit{id: files[i].id, count: count, snippets: snippets, mtime: mtime}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var found []*hit
	for _, h := range hits {
		if h != nil {
			found = append(found, h)
		}
	}
	// lastActive is an ISO string of the mtime, so time order is its order.
	slices.SortFunc(found, func(a, b *hit) int {
		if a.count != b.count {
			return b.count - a.count
		}
		if c := b.mtime.Truncate(time.Millisecond).Compare(a.mtime.Truncate(time.Millisecond)); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	found = found[:min(limit, len(found))]
	out := make([]protocol.SessionSearchResult, len(found))
	for i, h := range found {
		r := protocol.SessionSearchResult{
			SessionID: h.id, Title: h.id, MatchCount: h.count,
			Snippets: make([]protocol.SearchSnippet, len(h.snippets)), LastActive: protocol.Timestamp(h.mtime),
		}
		for j, sn := range h.snippets {
			r.Snippets[j] = protocol.SearchSnippet(sn)
		}
		if data, mtime, err := s.files.Read(ws, h.id); err == nil {
			info := transcript.QuickInfo(h.id, data, mtime)
			r.Title, r.Summary = info.Title, info.Summary
		}
		out[i] = r
	}
	return out, nil
}

// CheckQuery returns ErrQueryTooShort for a query under MinQueryLength
// UTF-16 units.
func CheckQuery(q string) error {
	if protocol.UTF16Len(q) < MinQueryLength {
		return ErrQueryTooShort
	}
	return nil
}

// SearchLimit applies the contract's default and cap to a requested limit.
func SearchLimit(limit int) int {
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	return min(limit, MaxSearchLimit)
}

// read returns a session of an existing workspace, with the contract's
// 404s.
func (s *Catalog) read(ref protocol.SessionRef) ([]byte, time.Time, error) {
	if !s.wss.Exists(ref.Workspace) {
		return nil, time.Time{}, ErrWorkspaceNotFound
	}
	data, mtime, err := s.files.Read(ref.Workspace, ref.Session)
	if errors.Is(err, jsonl.ErrNotFound) {
		return nil, time.Time{}, ErrSessionNotFound
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sessions: read %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	return data, mtime, nil
}

// Export renders a session as Markdown.
func (s *Catalog) Export(ref protocol.SessionRef) (string, error) {
	data, _, err := s.read(ref)
	if err != nil {
		return "", err
	}
	return transcript.ExportMarkdown(ref.Session, transcript.Parse(data), s.cfg.Location), nil
}

// Timeline returns a session's tool timeline as a JSON array.
func (s *Catalog) Timeline(ref protocol.SessionRef) (json.RawMessage, error) {
	data, _, err := s.read(ref)
	if err != nil {
		return nil, err
	}
	b, err := transcript.TimelineJSON(data)
	if err != nil {
		return nil, fmt.Errorf("sessions: encode timeline of %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	return b, nil
}

// Create writes a new session's meta line. title is stored as given (any
// JSON value; absent or null means no title, and the id stands in).
func (s *Catalog) Create(ws string, title json.RawMessage, branch *protocol.SessionBranch) (protocol.SessionInfo, error) {
	if !s.wss.Exists(ws) {
		return protocol.SessionInfo{}, ErrWorkspaceNotFound
	}
	info, meta, err := NewSession(title, branch, s.now())
	if err != nil {
		return protocol.SessionInfo{}, err
	}
	line := append(meta, '\n')
	err = s.files.Rewrite(ws, info.ID, true, func(data []byte) ([]byte, error) {
		if len(data) > 0 {
			return nil, nil
		}
		return line, nil
	})
	if err != nil {
		return protocol.SessionInfo{}, fmt.Errorf("sessions: create in %s: %w", ws, err)
	}
	s.Invalidate(ws, info.ID)
	return info, nil
}

// NewSession picks a new session's id and returns its listing entry and
// meta line (without newline). title is the client's JSON value (absent or
// null: no title); branch, when set, is recorded as the meta's branchOf.
func NewSession(title json.RawMessage, branch *protocol.SessionBranch, now time.Time) (protocol.SessionInfo, []byte, error) {
	id := "session-" + protocol.NewUUID()
	ts := protocol.Timestamp(now)
	info := protocol.SessionInfo{ID: id, Title: id, LastActive: ts, Created: ts}
	rawTitle := json.RawMessage("null")
	if len(title) > 0 && string(title) != "null" {
		var v any
		if err := json.Unmarshal(title, &v); err != nil {
			return protocol.SessionInfo{}, nil, protocol.Errorf(protocol.Invalid, "title must be JSON")
		}
		rawTitle, _ = json.Marshal(v)
		info.Title = v
	}
	line := `{"type":"meta","title":` + string(rawTitle) + `,"created":"` + ts + `"`
	if branch != nil {
		b, err := json.Marshal(branch)
		if err != nil {
			return protocol.SessionInfo{}, nil, fmt.Errorf("sessions: encode branch: %w", err)
		}
		line += `,"branchOf":` + string(b)
		info.BranchOf = branch
	}
	return info, []byte(line + "}"), nil
}

// Locate finds a session: in loc.Workspace when given, else in every
// workspace directory in name order, first match winning.
func (s *Catalog) Locate(loc protocol.SessionLocator) (protocol.SessionRef, error) {
	if !protocol.ValidID(loc.Session) || loc.Workspace != "" && !protocol.ValidID(loc.Workspace) {
		return protocol.SessionRef{}, ErrSessionNotFound
	}
	exists := func(ws string) bool {
		path, err := s.files.Path(ws, loc.Session)
		if err != nil {
			return false
		}
		fi, err := os.Stat(path)
		return err == nil && fi.Mode().IsRegular()
	}
	if loc.Workspace != "" {
		if exists(loc.Workspace) {
			return protocol.SessionRef{Workspace: loc.Workspace, Session: loc.Session}, nil
		}
		return protocol.SessionRef{}, ErrSessionNotFound
	}
	ents, err := os.ReadDir(s.wss.Root())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return protocol.SessionRef{}, fmt.Errorf("sessions: list workspaces: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && protocol.ValidID(e.Name()) && exists(e.Name()) {
			return protocol.SessionRef{Workspace: e.Name(), Session: loc.Session}, nil
		}
	}
	return protocol.SessionRef{}, ErrSessionNotFound
}

// Rename sets a session's title, keeping every other line.
func (s *Catalog) Rename(loc protocol.SessionLocator, title string) (protocol.SessionRenameReply, error) {
	if title == "" {
		return protocol.SessionRenameReply{}, ErrTitleRequired
	}
	ref, err := s.Locate(loc)
	if err != nil {
		return protocol.SessionRenameReply{}, err
	}
	err = s.files.Rewrite(ref.Workspace, ref.Session, false, func(data []byte) ([]byte, error) {
		return transcript.WithTitle(data, title, s.now()), nil
	})
	s.Invalidate(ref.Workspace, ref.Session)
	if errors.Is(err, jsonl.ErrNotFound) {
		return protocol.SessionRenameReply{}, ErrSessionNotFound
	}
	if err != nil {
		return protocol.SessionRenameReply{}, fmt.Errorf("sessions: rename %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	return protocol.SessionRenameReply{ID: ref.Session, Title: title}, nil
}

// Delete removes a session file and returns which one it was.
func (s *Catalog) Delete(loc protocol.SessionLocator) (protocol.SessionRef, error) {
	ref, err := s.Locate(loc)
	if err != nil {
		return ref, err
	}
	err = s.files.Delete(ref.Workspace, ref.Session)
	s.Invalidate(ref.Workspace, ref.Session)
	if errors.Is(err, jsonl.ErrNotFound) {
		return ref, ErrSessionNotFound
	}
	if err != nil {
		return ref, fmt.Errorf("sessions: delete %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	return ref, nil
}

// Summary builds a session's post-session summary (writing a lazy summary
// back like the listing does).
func (s *Catalog) Summary(loc protocol.SessionLocator) (protocol.SessionSummary, error) {
	ref, err := s.Locate(loc)
	if err != nil {
		return protocol.SessionSummary{}, err
	}
	e, err := s.load(ref.Workspace, ref.Session)
	var data []byte
	if err == nil {
		data, _, err = s.files.Read(ref.Workspace, ref.Session)
	}
	if errors.Is(err, jsonl.ErrNotFound) {
		return protocol.SessionSummary{}, ErrSessionNotFound
	}
	if err != nil {
		return protocol.SessionSummary{}, fmt.Errorf("sessions: summary %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	return transcript.SessionSummary(ref.Session, transcript.Parse(data), e.info), nil
}

// parallel runs fn(0..n-1) on at most workers goroutines and returns the
// first error (or ctx's).
func parallel(ctx context.Context, workers, n int, fn func(i int) error) error {
	if n == 0 {
		return nil
	}
	workers = max(1, min(workers, n))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		ferr error
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if ferr != nil || next >= n {
			return 0, false
		}
		if err := ctx.Err(); err != nil {
			ferr = err
			return 0, false
		}
		i := next
		next++
		return i, true
	}
	for range workers {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if ferr == nil {
						ferr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return ferr
}
