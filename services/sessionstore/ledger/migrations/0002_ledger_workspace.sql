-- +goose Up
-- The workspace of each usage line, so a workspace's spend can be checked
-- against its budget. Lines from before this migration belong to none.
ALTER TABLE ledger_lines ADD COLUMN workspace text NOT NULL DEFAULT '';
CREATE INDEX ledger_lines_workspace ON ledger_lines (workspace, seq) WHERE kind = 'usage';

-- +goose Down
DROP INDEX ledger_lines_workspace;
ALTER TABLE ledger_lines DROP COLUMN workspace;
