-- The highest autonomy level a chat in the team's workspaces runs at
-- (issue "Trust boundaries"): a request above it is lowered. Existing
-- teams get the default, normal.

-- +goose Up
ALTER TABLE teams ADD COLUMN max_autonomy text NOT NULL DEFAULT 'normal'
    CHECK (max_autonomy IN ('normal', 'trusted', 'yolo'));

-- +goose Down
ALTER TABLE teams DROP COLUMN max_autonomy;
