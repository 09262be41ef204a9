-- +goose Up
-- One row per sealed secret of a team's vault (team '' is the local vault
-- with --store=postgres). sealed is nonce‖ciphertext‖tag, bound to team
-- and name; the key is never stored here.
CREATE TABLE vault_secrets (
    team       text        NOT NULL,
    name       text        NOT NULL,
    type       text        NOT NULL,
    updated_at timestamptz NOT NULL,
    sealed     bytea       NOT NULL,
    PRIMARY KEY (team, name)
);

-- The fingerprint of the key the secrets are sealed with: a store whose
-- vault.key differs refuses to seal or open instead of mixing keys.
CREATE TABLE vault_key (
    id          int   PRIMARY KEY CHECK (id = 1),
    fingerprint bytea NOT NULL
);

-- +goose Down
DROP TABLE vault_key;
DROP TABLE vault_secrets;
