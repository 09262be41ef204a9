package sessionstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// Store is one backend of the session store: workspaces and their sessions
// (history, the sessions API); the minds are the frames package's. The JSONL files (Files)
// and PostgreSQL (pgstore.Store) implement it and pass the one
// conformance suite in sessionstore/storetest.
//
// Ids reach a Store already checked with protocol.ValidID. Errors carry
// the contract's statuses and texts (sessions.ErrWorkspaceNotFound,
// sessions.ErrSessionNotFound, workspaces.ErrNotFound, …) as
// *protocol.Error.
type Store interface {
	// EnsureDefault creates workspace "default" when it does not exist.
	EnsureDefault(ctx context.Context) error
	// WorkspaceExists reports whether workspace id exists in this store.
	WorkspaceExists(ctx context.Context, id string) (bool, error)
	// GetWorkspace reads a workspace's doc, unknown fields included.
	GetWorkspace(ctx context.Context, id string) (workspaces.Doc, error)
	// ListWorkspaces returns every workspace, oldest first (ties by id).
	ListWorkspaces(ctx context.Context) ([]workspaces.Doc, error)
	// CreateWorkspace validates fields and creates a workspace whose id is
	// the slug of its name, skipping ids that exist here or that taken
	// (nil: none) reports, such as another store's.
	CreateWorkspace(ctx context.Context, fields workspaces.Doc, taken func(id string) (bool, error)) (workspaces.Doc, error)
	// UpdateWorkspace merges fields into a workspace (null removes).
	UpdateWorkspace(ctx context.Context, id string, fields workspaces.Doc) (workspaces.Doc, error)
	// DeleteWorkspace removes a workspace with its sessions and memories
	// and returns the removed sessions' ids.
	DeleteWorkspace(ctx context.Context, id string) ([]string, error)

	// ListSessions lists a workspace's sessions, most recently active
	// first, writing lazy summaries back.
	ListSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error)
	// RecentSessions is ListSessions for what runs on every turn
	// (Workspace Now): it may miss an edit made behind the store's back
	// for a moment (JSONL: sessions.DefaultRescan), never the store's own.
	RecentSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error)
	// SessionDigests lists a workspace's sessions last active at or after
	// since, in no order, each with the summary a listing would show (a
	// due one generated but not written back): the memory lifecycle reads
	// sessions without touching them.
	SessionDigests(ctx context.Context, ws string, since time.Time) ([]protocol.SessionInfo, error)
	// SearchSessions searches a workspace's sessions (contract §6).
	SearchSessions(ctx context.Context, req protocol.SessionSearchRequest) ([]protocol.SessionSearchResult, error)
	// ExportSession renders a session as Markdown.
	ExportSession(ctx context.Context, ref protocol.SessionRef) (string, error)
	// SessionTimeline returns a session's tool timeline (a JSON array).
	SessionTimeline(ctx context.Context, ref protocol.SessionRef) (json.RawMessage, error)
	// CreateSession creates an empty session in an existing workspace.
	CreateSession(ctx context.Context, req protocol.SessionCreateRequest) (protocol.SessionInfo, error)
	// LocateSession finds a session: in loc.Workspace when set, else the
	// first workspace in name order holding it.
	LocateSession(ctx context.Context, loc protocol.SessionLocator) (protocol.SessionRef, error)
	// RenameSession sets a session's title (non-empty); it is activity.
	RenameSession(ctx context.Context, ref protocol.SessionRef, title string) error
	// DeleteSession removes a session.
	DeleteSession(ctx context.Context, ref protocol.SessionRef) error
	// SessionSummary builds a session's post-session summary.
	SessionSummary(ctx context.Context, ref protocol.SessionRef) (protocol.SessionSummary, error)

	// History reads a session's messages (and tool events); a missing
	// session is an empty history.
	History(ctx context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error)
	// Append durably appends exactly one message or tool event (its
	// timestamp already set), creating the session when it does not exist.
	// A request with a Key that the session holds a line of already
	// appends nothing and answers that line's timestamp, Duplicate set.
	Append(ctx context.Context, req protocol.AppendRequest) (protocol.AppendReply, error)
}
