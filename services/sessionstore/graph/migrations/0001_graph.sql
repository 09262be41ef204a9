-- +goose Up
-- The knowledge graph of each mind (mind is the frames' mind key). An
-- entity or relation is never deleted: a wrong one gets valid_to set.
-- Among the valid entities of a mind, key (the normalised name) is
-- unique; among its valid relations, (source, target, type).
CREATE TABLE kg_entities (
    mind       text NOT NULL,
    id         text NOT NULL,
    key        text NOT NULL,
    type       text NOT NULL,
    name       text NOT NULL,
    properties jsonb NOT NULL DEFAULT '{}',
    mentions   integer NOT NULL DEFAULT 1,
    valid_from text NOT NULL,
    valid_to   text,
    recorded   text NOT NULL,
    PRIMARY KEY (mind, id)
);
CREATE UNIQUE INDEX kg_entities_key ON kg_entities (mind, key) WHERE valid_to IS NULL;

CREATE TABLE kg_relations (
    mind       text NOT NULL,
    id         text NOT NULL,
    source     text NOT NULL,
    target     text NOT NULL,
    type       text NOT NULL,
    confidence double precision NOT NULL,
    properties jsonb NOT NULL DEFAULT '{}',
    mentions   integer NOT NULL DEFAULT 1,
    valid_from text NOT NULL,
    valid_to   text,
    recorded   text NOT NULL,
    PRIMARY KEY (mind, id)
);
CREATE UNIQUE INDEX kg_relations_link ON kg_relations (mind, source, target, type) WHERE valid_to IS NULL;
CREATE INDEX kg_relations_source ON kg_relations (mind, source);
CREATE INDEX kg_relations_target ON kg_relations (mind, target);

-- +goose Down
DROP TABLE kg_relations;
DROP TABLE kg_entities;
