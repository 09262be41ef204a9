-- +goose Up
-- One JSON document per kind and owner: a user's profile, a team's custom
-- personas. scope names the owner's kind ('' for the local desktop owner).
CREATE TABLE user_docs (
    kind    text NOT NULL,
    scope   text NOT NULL,
    owner   text NOT NULL,
    doc     jsonb NOT NULL,
    updated timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, scope, owner)
);

-- +goose Down
DROP TABLE user_docs;
