-- Teams, members, roles, tokens and capability policies (issue 8).
-- Table names carry a team_ prefix so they never clash with the session
-- store's own tables in the same database.

-- +goose Up
CREATE TABLE team_users (
    id         text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE teams (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    code_tools boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE team_members (
    team_id    text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    user_id    text NOT NULL REFERENCES team_users (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user_idx ON team_members (user_id);

CREATE TABLE team_tokens (
    id           text PRIMARY KEY,
    user_id      text NOT NULL REFERENCES team_users (id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '',
    hash         bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX team_tokens_user_idx ON team_tokens (user_id);

CREATE TABLE team_policies (
    team_id       text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    role          text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    blocked_tools text[] NOT NULL DEFAULT '{}',
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, role)
);

-- +goose Down
DROP TABLE team_policies;
DROP TABLE team_tokens;
DROP TABLE team_members;
DROP TABLE teams;
DROP TABLE team_users;
