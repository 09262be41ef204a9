package teams

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

// testPool returns a pool on a fresh, empty database.
func testPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// fixture is a migrated teams store with a map of workspace → team.
type fixture struct {
	t          *Teams
	workspaces map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := testPool(t)
	if err := Migrate(context.Background(), pool, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	f := &fixture{workspaces: map[string]string{}}
	tm, err := New(Config{Pool: pool, Workspaces: WorkspaceTeamsFunc(func(_ context.Context, ws string) (string, error) {
		team, ok := f.workspaces[ws]
		if !ok {
			return "", &protocol.Error{Kind: protocol.NotFound, Message: "Workspace not found"}
		}
		return team, nil
	})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.t = tm
	return f
}

// ok returns a checker that fails t on an error: ok(t)(call()).
func ok(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	}
}

// wantKind fails unless err is a protocol error of kind (and code, when
// given).
func wantKind(t *testing.T, err error, kind protocol.Kind, code string) {
	t.Helper()
	e := protocol.AsError(err)
	if e == nil {
		t.Fatalf("want %s %s, got %v", kind, code, err)
	}
	if e.Kind != kind || (code != "" && e.Code != code) {
		t.Fatalf("want %s %s, got %s %s (%s)", kind, code, e.Kind, e.Code, e.Message)
	}
}
