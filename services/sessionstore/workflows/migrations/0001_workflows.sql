-- +goose Up
-- One row per workspace: its recorded tool sequences and captured
-- patterns, as workflows.json would hold them.
CREATE TABLE workflow_state (
    workspace text PRIMARY KEY,
    doc       jsonb NOT NULL
);

-- +goose Down
DROP TABLE workflow_state;
