-- Idempotent appends: a line appended with a key (a turn's user message,
-- reply or tool event) keeps it, and a second append of the same key to
-- the same session (a resend whose answer was lost) finds it instead of
-- adding a copy. Lines appended without a key keep NULL.

-- +goose Up
ALTER TABLE session_lines ADD COLUMN append_key text;
CREATE UNIQUE INDEX session_lines_append_key ON session_lines (workspace, session, append_key) WHERE append_key IS NOT NULL;

-- +goose Down
DROP INDEX session_lines_append_key;
ALTER TABLE session_lines DROP COLUMN append_key;
