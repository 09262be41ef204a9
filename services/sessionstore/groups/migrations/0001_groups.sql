-- +goose Up
-- One row per agent group: the group's JSON as the file would hold it, in
-- creation order (seq).
CREATE TABLE agent_groups (
    seq  bigserial NOT NULL UNIQUE,
    id   text PRIMARY KEY,
    doc  jsonb NOT NULL
);

-- +goose Down
DROP TABLE agent_groups;
