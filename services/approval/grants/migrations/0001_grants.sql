-- +goose Up
-- One row per standing approval, in insertion order (seq). Text columns
-- keep the exact strings of the file format; expires is expires_at parsed,
-- for filtering (NULL: never expires).
CREATE TABLE approval_grants (
    seq                 bigserial NOT NULL UNIQUE,
    id                  text PRIMARY KEY,
    tool_name           text NOT NULL,
    target_key          text NOT NULL,
    source_workspace_id text,
    description         text NOT NULL,
    granted_at          text NOT NULL,
    expires_at          text,
    expires             timestamptz
);
CREATE INDEX approval_grants_target ON approval_grants (tool_name, target_key);

-- +goose Down
DROP TABLE approval_grants;
