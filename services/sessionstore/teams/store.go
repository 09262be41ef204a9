package teams

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/libs/protocol"
)

// VersionTable is the goose version table of the teams schema, separate
// from the session store's so each schema migrates on its own.
const VersionTable = "waggle_schema_teams"

// migrationLockID is the advisory lock that serialises migrations of the
// teams schema when several store replicas start at once.
const migrationLockID = 0x7761676C_7465616D // "waglteam"

// tokenPrefix marks Waggle tokens so a leaked one is recognisable.
const tokenPrefix = "wgl_"

// lastUsedEvery bounds how often a token's last-used time is written: a
// write per request would turn every read into a write.
const lastUsedEvery = time.Minute

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate applies the embedded migrations of the teams schema; running it
// again (or from several replicas at once) is harmless.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	applied, err := pgmigrate.Up(ctx, pool, pgmigrate.Set{FS: pgmigrate.Sub(migrations, "migrations"), Table: VersionTable, LockID: migrationLockID})
	if err != nil {
		return fmt.Errorf("teams: migrate: %w", err)
	}
	if log != nil {
		for _, v := range applied {
			log.Info("teams: migration applied", "version", v)
		}
	}
	return nil
}

// Directory is the team directory: teams, their members and roles, API
// tokens and per-role tool policies, in PostgreSQL. Permission
// checks live in Authorizer and the handlers, not here.
type Directory struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewDirectory returns a directory on pool (migrated with Migrate).
func NewDirectory(pool *pgxpool.Pool, now func() time.Time) *Directory {
	if now == nil {
		now = time.Now
	}
	return &Directory{pool: pool, now: now}
}

var (
	errTeamNotFound   = &protocol.Error{Kind: protocol.NotFound, Message: "Team not found"}
	errMemberNotFound = &protocol.Error{Kind: protocol.NotFound, Message: "Member not found"}
	errTokenNotFound  = &protocol.Error{Kind: protocol.NotFound, Message: "Token not found"}
	errTeamExists     = &protocol.Error{Kind: protocol.Conflict, Message: "Team already exists"}
	errLastOwner      = &protocol.Error{Kind: protocol.Conflict, Message: "A team needs at least one owner"}
	errInvalidToken   = &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeInvalidToken}
)

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func (s *Directory) ensureUser(ctx context.Context, q querier, id string) error {
	if _, err := q.Exec(ctx, `INSERT INTO team_users (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, s.now()); err != nil {
		return fmt.Errorf("teams: ensure user %s: %w", id, err)
	}
	return nil
}

// querier is what a pool and a transaction share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateTeam creates team id with owner as its first owner (no owner for
// an empty owner).
func (s *Directory) CreateTeam(ctx context.Context, id, name, owner string) (protocol.Team, error) {
	t := protocol.Team{ID: id, Name: name, MaxAutonomy: protocol.AutonomyNormal, Created: s.now().UTC()}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO teams (id, name, created_at) VALUES ($1, $2, $3)`, id, name, t.Created); err != nil {
			if isUniqueViolation(err) {
				return errTeamExists
			}
			return err
		}
		if owner == "" {
			return nil
		}
		if err := s.ensureUser(ctx, tx, owner); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO team_members (team_id, user_id, role, created_at) VALUES ($1, $2, 'owner', $3)`, id, owner, t.Created)
		return err
	})
	if err != nil {
		return protocol.Team{}, wrap("create team", id, err)
	}
	return t, nil
}

// wrap adds context to err unless it is a protocol error meant for the
// client.
func wrap(op, id string, err error) error {
	if err == nil || protocol.AsError(err) != nil {
		return err
	}
	return fmt.Errorf("teams: %s %s: %w", op, id, err)
}

// Team reads one team.
func (s *Directory) Team(ctx context.Context, id string) (protocol.Team, error) {
	var t protocol.Team
	err := s.pool.QueryRow(ctx, `SELECT id, name, code_tools, max_autonomy, created_at FROM teams WHERE id = $1`, id).
		Scan(&t.ID, &t.Name, &t.CodeTools, &t.MaxAutonomy, &t.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errTeamNotFound
	}
	if err != nil {
		return t, wrap("read team", id, err)
	}
	return t, nil
}

// Teams lists every team, by id.
func (s *Directory) Teams(ctx context.Context) ([]protocol.Team, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, code_tools, max_autonomy, created_at FROM teams ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("teams: list teams: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.Team, error) {
		var t protocol.Team
		return t, r.Scan(&t.ID, &t.Name, &t.CodeTools, &t.MaxAutonomy, &t.Created)
	})
}

// TeamChange is what UpdateTeam changes; nil fields stay as they are.
type TeamChange struct {
	Name        *string
	CodeTools   *bool
	MaxAutonomy *string // one of protocol.AutonomyLevels (checked by the caller and the table)
}

// UpdateTeam changes a team's name, code-tools switch and autonomy cap.
func (s *Directory) UpdateTeam(ctx context.Context, id string, c TeamChange) (protocol.Team, error) {
	var t protocol.Team
	err := s.pool.QueryRow(ctx, `UPDATE teams SET name = COALESCE($2, name), code_tools = COALESCE($3, code_tools),
		max_autonomy = COALESCE($4, max_autonomy)
		WHERE id = $1 RETURNING id, name, code_tools, max_autonomy, created_at`, id, c.Name, c.CodeTools, c.MaxAutonomy).
		Scan(&t.ID, &t.Name, &t.CodeTools, &t.MaxAutonomy, &t.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errTeamNotFound
	}
	if err != nil {
		return t, wrap("update team", id, err)
	}
	return t, nil
}

// DeleteTeam deletes a team with its members and policies.
func (s *Directory) DeleteTeam(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM teams WHERE id = $1`, id)
	if err != nil {
		return wrap("delete team", id, err)
	}
	if tag.RowsAffected() == 0 {
		return errTeamNotFound
	}
	return nil
}

// Memberships lists the teams user belongs to, by team id.
func (s *Directory) Memberships(ctx context.Context, user string) ([]protocol.TeamMembership, error) {
	rows, err := s.pool.Query(ctx, `SELECT team_id, role FROM team_members WHERE user_id = $1 ORDER BY team_id`, user)
	if err != nil {
		return nil, fmt.Errorf("teams: memberships of %s: %w", user, err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.TeamMembership, error) {
		var m protocol.TeamMembership
		return m, r.Scan(&m.Team, &m.Role)
	})
	if err != nil {
		return nil, fmt.Errorf("teams: memberships of %s: %w", user, err)
	}
	return ms, nil
}

// Role is user's role in team, "" when they are not a member.
func (s *Directory) Role(ctx context.Context, team, user string) (string, error) {
	var role string
	err := s.pool.QueryRow(ctx, `SELECT role FROM team_members WHERE team_id = $1 AND user_id = $2`, team, user).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("teams: role of %s in %s: %w", user, team, err)
	}
	return role, nil
}

// Members lists a team's members, by user id.
func (s *Directory) Members(ctx context.Context, team string) ([]protocol.TeamMember, error) {
	rows, err := s.pool.Query(ctx, `SELECT team_id, user_id, role, created_at FROM team_members WHERE team_id = $1 ORDER BY user_id`, team)
	if err != nil {
		return nil, fmt.Errorf("teams: members of %s: %w", team, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.TeamMember, error) {
		var m protocol.TeamMember
		return m, r.Scan(&m.Team, &m.User, &m.Role, &m.Created)
	})
}

// PutMember adds user to team with role or changes their role, creating
// the user when needed. Demoting the last owner is refused.
func (s *Directory) PutMember(ctx context.Context, team, user, role string) (protocol.TeamMember, error) {
	m := protocol.TeamMember{Team: team, User: user, Role: role}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTeam(ctx, tx, team); err != nil {
			return err
		}
		if role != protocol.TeamRoleOwner {
			if err := keepAnOwner(ctx, tx, team, user); err != nil {
				return err
			}
		}
		if err := s.ensureUser(ctx, tx, user); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO team_members (team_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (team_id, user_id) DO UPDATE SET role = EXCLUDED.role RETURNING created_at`,
			team, user, role, s.now()).Scan(&m.Created)
	})
	if err != nil {
		return protocol.TeamMember{}, wrap("put member", team+"/"+user, err)
	}
	return m, nil
}

// RemoveMember removes user from team; removing the last owner is refused.
func (s *Directory) RemoveMember(ctx context.Context, team, user string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTeam(ctx, tx, team); err != nil {
			return err
		}
		if err := keepAnOwner(ctx, tx, team, user); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM team_members WHERE team_id = $1 AND user_id = $2`, team, user)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errMemberNotFound
		}
		return nil
	})
	return wrap("remove member", team+"/"+user, err)
}

// lockTeam locks a team's row so owner counts stay true until commit.
func lockTeam(ctx context.Context, tx pgx.Tx, team string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM teams WHERE id = $1 FOR UPDATE`, team).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return errTeamNotFound
	}
	return err
}

// keepAnOwner refuses a change that would leave a team that has an owner
// without one, when user is that owner.
func keepAnOwner(ctx context.Context, tx pgx.Tx, team, user string) error {
	var others, self int
	err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE user_id <> $2), count(*) FILTER (WHERE user_id = $2)
		FROM team_members WHERE team_id = $1 AND role = 'owner'`, team, user).Scan(&others, &self)
	if err != nil {
		return err
	}
	if self > 0 && others == 0 {
		return errLastOwner
	}
	return nil
}

// Policies lists a team's policies, by role rank.
func (s *Directory) Policies(ctx context.Context, team string) ([]protocol.TeamPolicy, error) {
	rows, err := s.pool.Query(ctx, `SELECT team_id, role, blocked_tools, updated_at FROM team_policies WHERE team_id = $1`, team)
	if err != nil {
		return nil, fmt.Errorf("teams: policies of %s: %w", team, err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.TeamPolicy, error) {
		var p protocol.TeamPolicy
		return p, r.Scan(&p.Team, &p.Role, &p.BlockedTools, &p.Updated)
	})
	if err != nil {
		return nil, fmt.Errorf("teams: policies of %s: %w", team, err)
	}
	slices.SortFunc(ps, func(a, b protocol.TeamPolicy) int { return rank(b.Role) - rank(a.Role) })
	return ps, nil
}

// BlockedTools is the policy of role in team (nil when none is set).
func (s *Directory) BlockedTools(ctx context.Context, team, role string) ([]string, error) {
	var tools []string
	err := s.pool.QueryRow(ctx, `SELECT blocked_tools FROM team_policies WHERE team_id = $1 AND role = $2`, team, role).Scan(&tools)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("teams: policy of %s/%s: %w", team, role, err)
	}
	return tools, nil
}

// SetPolicy replaces the blocked tools of role in team.
func (s *Directory) SetPolicy(ctx context.Context, team, role string, tools []string) (protocol.TeamPolicy, error) {
	p := protocol.TeamPolicy{Team: team, Role: role, BlockedTools: tools, Updated: s.now().UTC()}
	if p.BlockedTools == nil {
		p.BlockedTools = []string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO team_policies (team_id, role, blocked_tools, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (team_id, role) DO UPDATE SET blocked_tools = EXCLUDED.blocked_tools, updated_at = EXCLUDED.updated_at`,
		team, role, p.BlockedTools, p.Updated)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" {
			return p, errTeamNotFound
		}
		return p, wrap("set policy", team+"/"+role, err)
	}
	return p, nil
}

// hashToken is the stored form of a token.
func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// CreateToken issues a new token for user (created when missing) and
// returns its secret, which is never stored.
func (s *Directory) CreateToken(ctx context.Context, user, name string) (protocol.TokenCreated, error) {
	var secret [32]byte
	var id [8]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return protocol.TokenCreated{}, fmt.Errorf("teams: token: %w", err)
	}
	if _, err := rand.Read(id[:]); err != nil {
		return protocol.TokenCreated{}, fmt.Errorf("teams: token: %w", err)
	}
	tok := protocol.TokenCreated{
		TokenInfo: protocol.TokenInfo{ID: "tok_" + hex.EncodeToString(id[:]), User: user, Name: name, Created: s.now().UTC()},
		Token:     tokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:]),
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.ensureUser(ctx, tx, user); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO team_tokens (id, user_id, name, hash, created_at) VALUES ($1, $2, $3, $4, $5)`,
			tok.ID, user, name, hashToken(tok.Token), tok.Created)
		return err
	})
	if err != nil {
		return protocol.TokenCreated{}, wrap("create token for", user, err)
	}
	return tok, nil
}

// Verify returns the user of a live token, or a 401 INVALID_TOKEN.
func (s *Directory) Verify(ctx context.Context, token string) (string, error) {
	var id, user string
	var last sql.NullTime
	err := s.pool.QueryRow(ctx, `SELECT id, user_id, last_used_at FROM team_tokens WHERE hash = $1 AND revoked_at IS NULL`,
		hashToken(token)).Scan(&id, &user, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errInvalidToken
	}
	if err != nil {
		return "", fmt.Errorf("teams: verify token: %w", err)
	}
	now := s.now()
	if !last.Valid || now.Sub(last.Time) >= lastUsedEvery {
		if _, err := s.pool.Exec(ctx, `UPDATE team_tokens SET last_used_at = $2 WHERE id = $1`, id, now); err != nil {
			return "", fmt.Errorf("teams: token %s last used: %w", id, err)
		}
	}
	return user, nil
}

const tokenColumns = `id, user_id, name, created_at, last_used_at, revoked_at`

func scanToken(r pgx.Row) (protocol.TokenInfo, error) {
	var t protocol.TokenInfo
	err := r.Scan(&t.ID, &t.User, &t.Name, &t.Created, &t.LastUsed, &t.Revoked)
	return t, err
}

// Tokens lists user's tokens, newest first.
func (s *Directory) Tokens(ctx context.Context, user string) ([]protocol.TokenInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM team_tokens WHERE user_id = $1 ORDER BY created_at DESC, id`, user)
	if err != nil {
		return nil, fmt.Errorf("teams: tokens of %s: %w", user, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.TokenInfo, error) { return scanToken(r) })
}

// Token reads one token's description.
func (s *Directory) Token(ctx context.Context, id string) (protocol.TokenInfo, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM team_tokens WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errTokenNotFound
	}
	return t, wrap("read token", id, err)
}

// RevokeToken revokes a token; revoking it again keeps the first time.
func (s *Directory) RevokeToken(ctx context.Context, id string) (protocol.TokenInfo, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `UPDATE team_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1
		RETURNING `+tokenColumns, id, s.now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errTokenNotFound
	}
	return t, wrap("revoke token", id, err)
}
