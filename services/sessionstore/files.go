package sessionstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/sessions"
	"github.com/waggle-os/core/services/sessionstore/transcript"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// Files is the JSONL Store: every workspace a directory under
// <DataDir>/workspaces (docs/sessions.md, "Storage layout").
type Files struct {
	dataDir string
	files   *jsonl.Store
	wss     *workspaces.Registry
	sess    *sessions.Catalog
	log     *slog.Logger
	// damaged remembers the session files already reported as holding
	// lines that are not JSON (by path, with their size).
	damaged sync.Map
}

// NewFiles returns the JSONL store rooted at dataDir. loc renders export
// dates (nil: time.Local); log reports failed lazy summary write-backs.
func NewFiles(dataDir string, loc *time.Location, log *slog.Logger) *Files {
	files := jsonl.New(dataDir)
	wss := workspaces.New(dataDir)
	wss.Logger = log
	return &Files{
		dataDir: dataDir,
		files:   files,
		wss:     wss,
		sess:    sessions.New(files, wss, sessions.Config{Location: loc, Logger: log}),
		log:     cmp.Or(log, slog.Default()),
	}
}

// WriteRawSession replaces a session file with data as is, bypassing every
// rule: tests use it to plant torn, malformed or hand-written files.
func (f *Files) WriteRawSession(ws, session string, data []byte) error {
	path, err := f.files.Path(ws, session)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	err = os.WriteFile(path, data, 0o600)
	f.sess.Invalidate(ws, session)
	return err
}

// EnsureDefault implements Store.
func (f *Files) EnsureDefault(context.Context) error { return f.wss.EnsureDefault() }

// WorkspaceExists implements Store.
func (f *Files) WorkspaceExists(_ context.Context, id string) (bool, error) {
	return f.wss.Exists(id), nil
}

// GetWorkspace implements Store.
func (f *Files) GetWorkspace(_ context.Context, id string) (workspaces.Doc, error) {
	return f.wss.Get(id)
}

// ListWorkspaces implements Store.
func (f *Files) ListWorkspaces(context.Context) ([]workspaces.Doc, error) { return f.wss.List() }

// CreateWorkspace implements Store.
func (f *Files) CreateWorkspace(ctx context.Context, fields workspaces.Doc, taken func(string) (bool, error)) (workspaces.Doc, error) {
	if err := checkDeadline(ctx); err != nil {
		return workspaces.Doc{}, err
	}
	return f.wss.Create(fields, taken)
}

// UpdateWorkspace implements Store.
func (f *Files) UpdateWorkspace(ctx context.Context, id string, fields workspaces.Doc) (workspaces.Doc, error) {
	if err := checkDeadline(ctx); err != nil {
		return workspaces.Doc{}, err
	}
	return f.wss.Update(id, fields)
}

// DeleteWorkspace implements Store.
func (f *Files) DeleteWorkspace(ctx context.Context, id string) ([]string, error) {
	if err := checkDeadline(ctx); err != nil {
		return nil, err
	}
	ids, err := f.wss.Delete(id)
	f.sess.ForgetWorkspace(id)
	return ids, err
}

// ListSessions implements Store.
func (f *Files) ListSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error) {
	return f.sess.List(ctx, req.Workspace, req.HideEmpty)
}

// RecentSessions implements Store from the listing index.
func (f *Files) RecentSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error) {
	return f.sess.ListIndexed(ctx, req.Workspace, req.HideEmpty)
}

// SessionDigests implements Store.
func (f *Files) SessionDigests(ctx context.Context, ws string, since time.Time) ([]protocol.SessionInfo, error) {
	return f.sess.Digests(ctx, ws, since)
}

// SearchSessions implements Store.
func (f *Files) SearchSessions(ctx context.Context, req protocol.SessionSearchRequest) ([]protocol.SessionSearchResult, error) {
	return f.sess.Search(ctx, req.Workspace, req.Query, req.Limit)
}

// ExportSession implements Store.
func (f *Files) ExportSession(_ context.Context, ref protocol.SessionRef) (string, error) {
	return f.sess.Export(ref)
}

// SessionTimeline implements Store.
func (f *Files) SessionTimeline(_ context.Context, ref protocol.SessionRef) (json.RawMessage, error) {
	return f.sess.Timeline(ref)
}

// CreateSession implements Store.
func (f *Files) CreateSession(ctx context.Context, req protocol.SessionCreateRequest) (protocol.SessionInfo, error) {
	if err := checkDeadline(ctx); err != nil {
		return protocol.SessionInfo{}, err
	}
	return f.sess.Create(req.Workspace, req.Title, req.BranchOf)
}

// LocateSession implements Store.
func (f *Files) LocateSession(_ context.Context, loc protocol.SessionLocator) (protocol.SessionRef, error) {
	return f.sess.Locate(loc)
}

// RenameSession implements Store.
func (f *Files) RenameSession(ctx context.Context, ref protocol.SessionRef, title string) error {
	if err := checkDeadline(ctx); err != nil {
		return err
	}
	_, err := f.sess.Rename(protocol.SessionLocator{Workspace: ref.Workspace, Session: ref.Session}, title)
	return err
}

// DeleteSession implements Store.
func (f *Files) DeleteSession(ctx context.Context, ref protocol.SessionRef) error {
	if err := checkDeadline(ctx); err != nil {
		return err
	}
	_, err := f.sess.Delete(protocol.SessionLocator{Workspace: ref.Workspace, Session: ref.Session})
	return err
}

// SessionSummary implements Store.
func (f *Files) SessionSummary(_ context.Context, ref protocol.SessionRef) (protocol.SessionSummary, error) {
	return f.sess.Summary(protocol.SessionLocator{Workspace: ref.Workspace, Session: ref.Session})
}

// History implements Store.
func (f *Files) History(_ context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
	data, _, err := f.files.Read(req.Workspace, req.Session)
	if errors.Is(err, jsonl.ErrNotFound) {
		return protocol.HistoryReply{Messages: []protocol.Message{}}, nil
	}
	if err != nil {
		return protocol.HistoryReply{}, fmt.Errorf("sessionstore: history %s/%s: %w", req.Workspace, req.Session, err)
	}
	parsed := transcript.Parse(data)
	f.reportDamaged(req.SessionRef, parsed.Malformed, len(data))
	return historyReply(parsed, req.Tools), nil
}

// reportDamaged logs a session file holding lines that are not JSON, once
// per size of the file. Such lines are skipped by every reader and kept,
// byte for byte, by every rewrite: nothing is dropped without a person
// deciding to.
func (f *Files) reportDamaged(ref protocol.SessionRef, malformed, size int) {
	key := ref.Workspace + "/" + ref.Session
	if malformed == 0 {
		f.damaged.Delete(key)
		return
	}
	if prev, ok := f.damaged.Swap(key, size); ok && prev == size {
		return
	}
	f.log.Warn("session file has lines that are not JSON; they are skipped (and kept in the file)",
		"workspace", ref.Workspace, "session", ref.Session, "lines", malformed)
}

// historyReply is the reply for a parsed session.
func historyReply(f transcript.File, tools bool) protocol.HistoryReply {
	rep := protocol.HistoryReply{Messages: f.Messages}
	if rep.Messages == nil {
		rep.Messages = []protocol.Message{}
	}
	if tools {
		rep.Tools = f.Tools
	}
	return rep
}

// Append implements Store.
func (f *Files) Append(ctx context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
	if err := checkDeadline(ctx); err != nil {
		return protocol.AppendReply{}, err
	}
	ts := ""
	if req.Tool != nil {
		ts = req.Tool.Timestamp
	} else if req.Message != nil {
		ts = req.Message.Timestamp
	}
	stored, dup, err := f.files.AppendKeyed(req.Workspace, req.Session, req.Key, ts, jsonl.LineOf(req))
	if err != nil {
		return protocol.AppendReply{}, fmt.Errorf("sessionstore: append %s/%s: %w", req.Workspace, req.Session, err)
	}
	if !dup {
		f.sess.Invalidate(req.Workspace, req.Session)
	}
	return protocol.AppendReply{Timestamp: stored, Duplicate: dup}, nil
}

// checkDeadline refuses a write whose caller has given up: the bus hands
// a handler its caller's deadline, and a caller told "timed out" must
// not find the write done. A JSONL write is quick once started, so the
// check sits at its start (after any wait for the handler slot, which
// bus.Handle checks too).
func checkDeadline(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sessionstore: write not started: %w", err)
	}
	return nil
}
