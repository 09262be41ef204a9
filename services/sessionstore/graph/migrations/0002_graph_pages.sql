-- +goose Up
-- A page of a mind's valid entities, the most mentioned first
-- (Filter.Limit/Offset), is read from this index instead of sorting the
-- whole graph.
CREATE INDEX kg_entities_page ON kg_entities (mind, mentions DESC, key, id) WHERE valid_to IS NULL;

-- +goose Down
DROP INDEX kg_entities_page;
