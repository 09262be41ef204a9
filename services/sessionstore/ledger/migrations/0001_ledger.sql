-- +goose Up
-- One row per ledger line, in append order: usage records and reset
-- markers share the sequence so "since the last reset" is seq > the last
-- reset's seq.
CREATE TABLE ledger_lines (
    seq           bigserial PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('usage', 'reset')),
    at            timestamptz NOT NULL,
    model         text NOT NULL DEFAULT '',
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cost          double precision NOT NULL DEFAULT 0
);
CREATE INDEX ledger_lines_resets ON ledger_lines (seq) WHERE kind = 'reset';
CREATE INDEX ledger_lines_at ON ledger_lines (at) WHERE kind = 'usage';

CREATE TABLE ledger_settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- +goose Down
DROP TABLE ledger_settings;
DROP TABLE ledger_lines;
