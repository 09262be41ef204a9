-- +goose Up
-- One row per memory frame. mind is the mind's key (personal, user:<id>,
-- workspace:<id>); seq changes on every write so a process caching a
-- mind's vectors can tell what changed. search is the content and tags
-- the full-text index reads; vector is the embedding by vec_model, ranked
-- in process (no pgvector needed).
CREATE TABLE memory_frames (
    mind         text NOT NULL,
    id           text NOT NULL,
    seq          bigint NOT NULL,
    content      text NOT NULL,
    tags         text[],
    importance   text NOT NULL,
    source       text NOT NULL,
    created      text NOT NULL,
    created_ms   bigint NOT NULL,
    updated      text NOT NULL,
    access_count integer NOT NULL DEFAULT 0,
    search       text NOT NULL,
    tsv          tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, search)) STORED,
    vector       real[],
    vec_model    text,
    PRIMARY KEY (mind, id)
);
CREATE SEQUENCE memory_frames_seq;
CREATE UNIQUE INDEX memory_frames_content ON memory_frames (mind, md5(content));
CREATE INDEX memory_frames_tsv ON memory_frames USING gin (tsv);
CREATE INDEX memory_frames_recent ON memory_frames (mind, created DESC);
CREATE INDEX memory_frames_seq_idx ON memory_frames (mind, seq);

-- +goose Down
DROP TABLE memory_frames;
DROP SEQUENCE memory_frames_seq;
