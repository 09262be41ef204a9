-- Workspaces, sessions (one row each, plus one row per line) and memories.
-- Text columns keep JSON exactly as the JSONL store writes it, so both
-- stores feed the same digest algorithms the same bytes. Search columns
-- are lower-cased in Go (strings.ToLower), as the JSONL search does, so
-- matching does not depend on the database's collation.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE workspaces (
    id      text PRIMARY KEY,
    doc     text NOT NULL,   -- the workspace's JSON object
    created text NOT NULL,   -- ISO timestamp, the listing order
    team_id text
);
CREATE INDEX workspaces_team ON workspaces (team_id) WHERE team_id IS NOT NULL;

CREATE TABLE sessions (
    workspace     text NOT NULL,
    id            text NOT NULL,
    meta          text NOT NULL,          -- the meta line (a JSON object)
    summary       text,                   -- meta's summary when a non-empty string
    lsummary      text,                   -- summary lower-cased (by Go), what search matches
    first_line    text,                   -- first message line (derived title)
    message_count integer NOT NULL DEFAULT 0,
    line_count    integer NOT NULL DEFAULT 0,
    last_active   timestamptz NOT NULL,   -- the JSONL file's mtime
    PRIMARY KEY (workspace, id)
);
CREATE INDEX sessions_by_id ON sessions (id, workspace COLLATE "C");
CREATE INDEX sessions_summary_trgm ON sessions USING gin (lsummary gin_trgm_ops);

CREATE TABLE session_lines (
    workspace text NOT NULL,
    session   text NOT NULL,
    seq       integer NOT NULL,   -- 1-based position after the meta line
    mline     integer,            -- 1-based position among message lines; NULL for tool events
    lcontent  text,               -- a message's content lower-cased (by Go), what search matches
    line      text NOT NULL,      -- the line's JSON as the JSONL store writes it
    PRIMARY KEY (workspace, session, seq),
    FOREIGN KEY (workspace, session) REFERENCES sessions (workspace, id) ON DELETE CASCADE
);
-- Search reads only the first 50 message lines of a session.
CREATE INDEX session_lines_search_trgm ON session_lines USING gin (lcontent gin_trgm_ops) WHERE mline <= 50;

CREATE TABLE memories (
    workspace text NOT NULL,
    seq       bigserial,
    id        text NOT NULL UNIQUE,
    content   text NOT NULL,
    tags      text[],
    ts        text NOT NULL,
    search    text NOT NULL,      -- lower(content + tags), what search matches
    PRIMARY KEY (workspace, seq)
);
CREATE INDEX memories_search_trgm ON memories USING gin (search gin_trgm_ops);

-- +goose Down
DROP TABLE memories;
DROP TABLE session_lines;
DROP TABLE sessions;
DROP TABLE workspaces;
