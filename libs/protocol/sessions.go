package protocol

import "encoding/json"

// WorkspaceListReply answers ListWorkspaces, oldest workspace first.
type WorkspaceListReply struct {
	Workspaces []json.RawMessage `json:"workspaces"`
}

// WorkspaceDocReply is one workspace's stored JSON object.
type WorkspaceDocReply struct {
	Workspace json.RawMessage `json:"workspace"`
}

// WorkspaceCreateRequest carries the client's JSON object; the store
// validates it (name required), picks the id and sets created.
type WorkspaceCreateRequest struct {
	Fields json.RawMessage `json:"fields"`
}

// WorkspaceUpdateRequest merges Fields into a workspace (null removes a
// field; id and created never change).
type WorkspaceUpdateRequest struct {
	Workspace string          `json:"workspace"`
	Fields    json.RawMessage `json:"fields"`
}

// DeletedReply is the body `{"deleted":true}`.
type DeletedReply struct {
	Deleted bool `json:"deleted"`
}

// SessionInfo is a session's listing entry (contract §6). Title is a
// string, except for a stored non-string title, which is passed through.
type SessionInfo struct {
	ID           string  `json:"id"`
	Title        any     `json:"title"`
	Summary      *string `json:"summary"`
	MessageCount int     `json:"messageCount"`
	LastActive   string  `json:"lastActive"`
	Created      string  `json:"created"`
	// BranchOf is set on a branch: the session it was made from and where.
	BranchOf *SessionBranch `json:"branchOf,omitempty"`
}

// SessionBranch is where a branch leaves the session it was made from:
// the branch holds copies of that session's first At messages, and its
// own message At replaces the one at that index there (an edited user
// message). The original session is not changed.
type SessionBranch struct {
	Session string `json:"session"`
	At      int    `json:"at"`
}

// SessionBranchRequest makes a branch of a session that keeps its first
// At messages (and the tool events of their turns); the message at index
// At must be a user message, the one being edited.
type SessionBranchRequest struct {
	SessionRef
	At int `json:"at"`
}

// SessionListRequest lists a workspace's sessions.
type SessionListRequest struct {
	Workspace string `json:"workspace"`
	// HideEmpty drops sessions without messages.
	HideEmpty bool `json:"hideEmpty,omitempty"`
}

// SessionListReply is the listing, most recently active first.
type SessionListReply struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionSearchRequest searches a workspace's sessions for Query (at least
// 2 characters). Limit <= 0 means 20; it is capped at 50.
type SessionSearchRequest struct {
	Workspace string `json:"workspace"`
	Query     string `json:"query"`
	Limit     int    `json:"limit,omitempty"`
}

// SearchSnippet is one search hit's context; Role is the message role or
// "summary".
type SearchSnippet struct {
	Text string `json:"text"`
	Role string `json:"role"`
}

// SessionSearchResult is one matching session.
type SessionSearchResult struct {
	SessionID  string          `json:"sessionId"`
	Title      any             `json:"title"`
	Summary    *string         `json:"summary"`
	MatchCount int             `json:"matchCount"`
	Snippets   []SearchSnippet `json:"snippets"`
	LastActive string          `json:"lastActive"`
}

// SessionSearchReply lists matches by matchCount then lastActive, limited
// after sorting.
type SessionSearchReply struct {
	Results []SessionSearchResult `json:"results"`
}

// SessionExportReply is a session rendered as Markdown.
type SessionExportReply struct {
	Markdown string `json:"markdown"`
}

// SessionTimelineReply is the JSON array of TimelineEvent of contract §6,
// passed through to the client as is.
type SessionTimelineReply struct {
	Events json.RawMessage `json:"events"`
}

// SessionCreateRequest creates a session in Workspace. Title is the
// client's value as sent (absent or null: no title); it is stored as is.
type SessionCreateRequest struct {
	Workspace string          `json:"workspace"`
	Title     json.RawMessage `json:"title,omitempty"`
	// BranchOf is recorded in the new session's meta line; only the
	// session store's own BranchSession sets it (the HTTP create route
	// never does).
	BranchOf *SessionBranch `json:"branchOf,omitempty"`
}

// SessionLocator names a session whose workspace may be unknown: an empty
// Workspace means "search every workspace, first match wins".
type SessionLocator struct {
	Session   string `json:"session"`
	Workspace string `json:"workspace,omitempty"`
}

// SessionRenameRequest sets a session's title.
type SessionRenameRequest struct {
	SessionLocator
	Title string `json:"title"`
}

// SessionRenameReply is `{"id","title"}`.
type SessionRenameReply struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// SessionSummary is the body of GET /api/sessions/:id/summary.
type SessionSummary struct {
	SessionID         string `json:"sessionId"`
	Title             any    `json:"title"`
	MessageCount      int    `json:"messageCount"`
	UserMessages      int    `json:"userMessages"`
	AssistantMessages int    `json:"assistantMessages"`
	ToolsUsed         int    `json:"toolsUsed"`
	MemoriesSaved     int    `json:"memoriesSaved"`
	DocumentsCreated  int    `json:"documentsCreated"`
	Summary           string `json:"summary"`
	LastActive        string `json:"lastActive"`
	Created           string `json:"created"`
}
