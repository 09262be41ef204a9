package teams

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

func TestMigrateTwiceAndConcurrentlyIsHarmless(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() { errs <- Migrate(ctx, pool, nil) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	s := NewDirectory(pool, nil)
	if _, err := s.CreateTeam(ctx, "acme", "Acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pool, nil); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if _, err := s.Team(ctx, "acme"); err != nil {
		t.Fatalf("data lost after second migrate: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+VersionTable+` WHERE version_id > 0`).Scan(&n); err != nil {
		t.Fatalf("version table %s: %v", VersionTable, err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files) {
		t.Fatalf("applied migrations recorded = %d, want %d", n, len(files))
	}
}

func TestWorkspaceAuthorization(t *testing.T) {
	f := newFixture(t)
	check := ok(t)
	must := func(err error) { t.Helper(); check(nil, err) }
	_ = must
	ctx := context.Background()
	check(f.t.createTeam(ctx, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"}))
	check(f.t.createTeam(ctx, protocol.TeamCreateRequest{ID: "globex", Owner: "greg"}))
	for user, role := range map[string]string{"adam": "admin", "mia": "member", "vic": "viewer"} {
		check(f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: user, Role: role}))
	}
	f.workspaces["acme-ws"] = "acme"
	f.workspaces["globex-ws"] = "globex"
	f.workspaces["personal"] = ""

	// allowed is the zero kind: the action is allowed, no error.
	const allowed = protocol.Internal
	cases := []struct {
		user, ws, action string
		denied           protocol.Kind
		code             string
	}{
		{"olga", "acme-ws", "admin", allowed, ""},
		{"adam", "acme-ws", "admin", allowed, ""},
		{"mia", "acme-ws", "chat", allowed, ""},
		{"mia", "acme-ws", "write", allowed, ""},
		{"mia", "acme-ws", "admin", protocol.Forbidden, protocol.CodeForbidden},
		{"vic", "acme-ws", "read", allowed, ""},
		{"vic", "acme-ws", "chat", protocol.Forbidden, protocol.CodeViewerReadOnly},
		{"vic", "acme-ws", "write", protocol.Forbidden, protocol.CodeViewerReadOnly},
		{"mia", "globex-ws", "read", protocol.NotFound, ""},
		{"greg", "acme-ws", "read", protocol.NotFound, ""},
		{"nobody", "acme-ws", "read", protocol.NotFound, ""},
		{"mia", "no-such-ws", "read", protocol.NotFound, ""},
		{"mia", "personal", "read", protocol.NotFound, ""},
		{"mia", "../etc", "read", protocol.NotFound, ""},
	}
	for _, c := range cases {
		t.Run(c.user+"/"+c.ws+"/"+c.action, func(t *testing.T) {
			team, role, err := f.t.AuthorizeWorkspace(ctx, c.user, c.ws, c.action)
			if c.denied == allowed {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				if team != "acme" || role == "" {
					t.Fatalf("team, role = %q, %q", team, role)
				}
				return
			}
			wantKind(t, err, c.denied, c.code)
		})
	}

	_, _, err := f.t.AuthorizeWorkspace(ctx, "vic", "acme-ws", "chat")
	if e := protocol.AsError(err); e.Message != "Viewers cannot send messages in team workspaces. Ask a team admin to upgrade your role." {
		t.Fatalf("viewer chat message = %q", e.Message)
	}
	// A 404 for a foreign workspace is the same as for a missing one.
	_, _, e1 := f.t.AuthorizeWorkspace(ctx, "mia", "globex-ws", "read")
	_, _, e2 := f.t.AuthorizeWorkspace(ctx, "mia", "no-such-ws", "read")
	if e1.Error() != e2.Error() {
		t.Fatalf("foreign workspace leaks: %v vs %v", e1, e2)
	}

	f.t.cfg.PersonalWorkspaces = true
	if _, _, err := f.t.AuthorizeWorkspace(ctx, "mia", "personal", "write"); err != nil {
		t.Fatalf("personal workspace with PersonalWorkspaces: %v", err)
	}
}

func TestTokens(t *testing.T) {
	f := newFixture(t)
	check := ok(t)
	must := func(err error) { t.Helper(); check(nil, err) }
	_ = must
	ctx := context.Background()
	check(f.t.createTeam(ctx, protocol.TeamCreateRequest{ID: "acme", Owner: "alice"}))
	f.workspaces["ws1"] = "acme"

	tok, err := f.t.createToken(ctx, protocol.TokenCreateRequest{User: "alice", Name: "laptop"})
	must(err)
	if !strings.HasPrefix(tok.Token, "wgl_") || len(tok.Token) < 40 {
		t.Fatalf("token = %q", tok.Token)
	}
	var stored int
	if err := f.t.cfg.Pool.QueryRow(ctx, `SELECT count(*) FROM team_tokens WHERE hash = $1 OR convert_from(hash, 'LATIN1') LIKE '%' || $2 || '%'`,
		hashToken(tok.Token), tok.Token[4:]).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 1 {
		t.Fatalf("token rows matching hash = %d", stored)
	}

	rep, err := f.t.authenticate(ctx, protocol.AuthenticateRequest{Token: tok.Token, Workspace: "ws1", Action: "chat"})
	must(err)
	if rep.User != "alice" || rep.Team != "acme" || rep.Role != "owner" || len(rep.Teams) != 1 {
		t.Fatalf("authenticate = %+v", rep)
	}
	list, err := f.t.listTokens(ctx, protocol.TokenListRequest{Actor: "alice"})
	must(err)
	if len(list.Tokens) != 1 || list.Tokens[0].LastUsed == nil || list.Tokens[0].Name != "laptop" {
		t.Fatalf("tokens = %+v", list.Tokens)
	}
	if b, _ := json.Marshal(list); strings.Contains(string(b), tok.Token) {
		t.Fatal("token list leaks the secret")
	}

	_, err = f.t.authenticate(ctx, protocol.AuthenticateRequest{Token: tok.Token + "x"})
	wantKind(t, err, protocol.Unauthenticated, protocol.CodeInvalidToken)
	_, err = f.t.authenticate(ctx, protocol.AuthenticateRequest{})
	wantKind(t, err, protocol.Unauthenticated, protocol.CodeMissingToken)

	// Bob cannot see or revoke Alice's token, nor mint one for her.
	_, err = f.t.revokeToken(ctx, protocol.TokenRevokeRequest{Actor: "bob", ID: tok.ID})
	wantKind(t, err, protocol.NotFound, "")
	_, err = f.t.createToken(ctx, protocol.TokenCreateRequest{Actor: "bob", User: "alice"})
	wantKind(t, err, protocol.Forbidden, protocol.CodeForbidden)

	check(f.t.revokeToken(ctx, protocol.TokenRevokeRequest{Actor: "alice", ID: tok.ID}))
	_, err = f.t.authenticate(ctx, protocol.AuthenticateRequest{Token: tok.Token})
	wantKind(t, err, protocol.Unauthenticated, protocol.CodeInvalidToken)
}

func TestMembersAndOwners(t *testing.T) {
	f := newFixture(t)
	check := ok(t)
	must := func(err error) { t.Helper(); check(nil, err) }
	_ = must
	ctx := context.Background()
	ref := protocol.TeamRef{Team: "acme"}
	check(f.t.createTeam(ctx, protocol.TeamCreateRequest{Actor: "olga", ID: "acme", Name: "Acme Inc"}))
	_, err := f.t.createTeam(ctx, protocol.TeamCreateRequest{Actor: "greg", ID: "acme"})
	wantKind(t, err, protocol.Conflict, "")
	_, err = f.t.createTeam(ctx, protocol.TeamCreateRequest{Actor: "greg", ID: "Bad Slug"})
	wantKind(t, err, protocol.Invalid, "")

	asOlga, asAdam, asMia := ref, ref, ref
	asOlga.Actor, asAdam.Actor, asMia.Actor = "olga", "adam", "mia"
	check(f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asOlga, User: "adam", Role: "admin"}))
	check(f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asAdam, User: "mia", Role: "member"}))

	// Members cannot manage members; admins cannot touch owners.
	_, err = f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asMia, User: "eve", Role: "member"})
	wantKind(t, err, protocol.Forbidden, protocol.CodeForbidden)
	_, err = f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asAdam, User: "mia", Role: "owner"})
	wantKind(t, err, protocol.Forbidden, protocol.CodeForbidden)
	_, err = f.t.removeMember(ctx, protocol.MemberRef{TeamRef: asAdam, User: "olga"})
	wantKind(t, err, protocol.Forbidden, protocol.CodeForbidden)
	_, err = f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asOlga, User: "mia", Role: "superuser"})
	wantKind(t, err, protocol.Invalid, "")

	// The last owner stays.
	_, err = f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asOlga, User: "olga", Role: "admin"})
	wantKind(t, err, protocol.Conflict, "")
	_, err = f.t.removeMember(ctx, protocol.MemberRef{TeamRef: asOlga, User: "olga"})
	wantKind(t, err, protocol.Conflict, "")
	check(f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asOlga, User: "adam", Role: "owner"}))
	check(f.t.putMember(ctx, protocol.MemberPutRequest{TeamRef: asOlga, User: "olga", Role: "viewer"}))

	d, err := f.t.getTeam(ctx, asMia)
	must(err)
	got := map[string]string{}
	for _, m := range d.Members {
		got[m.User] = m.Role
	}
	if got["olga"] != "viewer" || got["adam"] != "owner" || got["mia"] != "member" || len(got) != 3 || d.Name != "Acme Inc" {
		t.Fatalf("team = %+v", d)
	}
	_, err = f.t.getTeam(ctx, protocol.TeamRef{Actor: "stranger", Team: "acme"})
	wantKind(t, err, protocol.NotFound, "")

	check(f.t.removeMember(ctx, protocol.MemberRef{TeamRef: asAdam, User: "mia"}))
	_, err = f.t.removeMember(ctx, protocol.MemberRef{TeamRef: asAdam, User: "mia"})
	wantKind(t, err, protocol.NotFound, "")

	mine, err := f.t.listTeams(ctx, protocol.TeamListRequest{Actor: "olga"})
	must(err)
	if len(mine.Teams) != 1 || mine.Teams[0].Role != "viewer" {
		t.Fatalf("olga's teams = %+v", mine)
	}
	none, err := f.t.listTeams(ctx, protocol.TeamListRequest{Actor: "mia"})
	must(err)
	if len(none.Teams) != 0 {
		t.Fatalf("removed member still lists %+v", none)
	}
}

func TestToolPolicyOverTheBus(t *testing.T) {
	f := newFixture(t)
	check := ok(t)
	must := func(err error) { t.Helper(); check(nil, err) }
	_ = must
	ctx := context.Background()
	nc := natstest.Start(t).Conn("session-store")
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceSessionStore})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	f.t.cfg.Conn = nc
	if err := f.t.Register(svc); err != nil {
		t.Fatal(err)
	}
	changed := make(chan string, 16)
	sub, err := nc.Subscribe(protocol.PolicyChanges.Subject, func(m *nats.Msg) {
		var c protocol.TeamPolicyChanged
		_ = json.Unmarshal(m.Data, &c)
		changed <- c.Team
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	policy := func(user, ws string) protocol.ToolPolicy {
		t.Helper()
		p, err := bus.Call(ctx, nc, protocol.GetToolPolicy, protocol.ToolPolicyRequest{User: user, Workspace: ws})
		if err != nil {
			t.Fatalf("tool policy: %v", err)
		}
		return p
	}
	waitChanged := func() {
		t.Helper()
		select {
		case team := <-changed:
			if team != "acme" {
				t.Fatalf("policy-changed for %q", team)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no policy-changed fact")
		}
	}

	if _, err := bus.Call(ctx, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Call(ctx, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Actor: "olga", Team: "acme"}, User: "mia", Role: "member"}); err != nil {
		t.Fatal(err)
	}
	waitChanged()
	f.workspaces["acme-ws"] = "acme"
	f.workspaces["home"] = ""

	if p := policy("mia", "home"); p.Governed || len(p.BlockedTools) != 0 {
		t.Fatalf("personal workspace policy = %+v", p)
	}
	if p := policy("mia", "acme-ws"); !p.Governed || !p.Blocks("bash") || p.Blocks("read_file") || p.Role != "member" {
		t.Fatalf("default team policy = %+v (bash must be off on a shared server)", p)
	}

	_, err = bus.Call(ctx, nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Actor: "mia", Team: "acme"}, Role: "member", BlockedTools: []string{"web_fetch"}})
	wantKind(t, err, protocol.Forbidden, protocol.CodeForbidden)
	if _, err := bus.Call(ctx, nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Actor: "olga", Team: "acme"}, Role: "member", BlockedTools: []string{"web_fetch", "write_file", "web_fetch"}}); err != nil {
		t.Fatal(err)
	}
	waitChanged()
	if p := policy("mia", "acme-ws"); strings.Join(p.BlockedTools, ",") != "bash,web_fetch,write_file" {
		t.Fatalf("member policy = %v", p.BlockedTools)
	}
	if p := policy("olga", "acme-ws"); strings.Join(p.BlockedTools, ",") != "bash" {
		t.Fatalf("owner policy = %v (member policy must not apply)", p.BlockedTools)
	}

	on := true
	if _, err := bus.Call(ctx, nc, protocol.UpdateTeam, protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Actor: "olga", Team: "acme"}, CodeTools: &on}); err != nil {
		t.Fatal(err)
	}
	waitChanged()
	if p := policy("mia", "acme-ws"); p.Blocks("bash") {
		t.Fatalf("bash still blocked after enabling code tools: %v", p.BlockedTools)
	}

	// The autonomy cap: normal by default, set by admins only, one of the
	// levels, the same for every role, announced like any policy change.
	if p := policy("olga", "acme-ws"); p.MaxAutonomy != protocol.AutonomyNormal {
		t.Fatalf("default autonomy cap = %q", p.MaxAutonomy)
	}
	yolo, bad := protocol.AutonomyYolo, "YOLO"
	_, err = bus.Call(ctx, nc, protocol.UpdateTeam, protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Actor: "mia", Team: "acme"}, MaxAutonomy: &yolo})
	wantKind(t, err, protocol.Forbidden, protocol.CodeForbidden)
	_, err = bus.Call(ctx, nc, protocol.UpdateTeam, protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Actor: "olga", Team: "acme"}, MaxAutonomy: &bad})
	wantKind(t, err, protocol.Invalid, "")
	tm, err := bus.Call(ctx, nc, protocol.UpdateTeam, protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Actor: "olga", Team: "acme"}, MaxAutonomy: &yolo})
	if err != nil || tm.MaxAutonomy != protocol.AutonomyYolo || !tm.CodeTools {
		t.Fatalf("set the autonomy cap: %+v, %v", tm, err)
	}
	waitChanged()
	if p := policy("mia", "acme-ws"); p.MaxAutonomy != protocol.AutonomyYolo {
		t.Fatalf("member's autonomy cap = %q", p.MaxAutonomy)
	}
	if p := policy("mia", "home"); p.MaxAutonomy != "" {
		t.Fatalf("personal workspace autonomy cap = %q", p.MaxAutonomy)
	}

	_, err = bus.Call(ctx, nc, protocol.GetToolPolicy, protocol.ToolPolicyRequest{User: "stranger", Workspace: "acme-ws"})
	wantKind(t, err, protocol.NotFound, "")

	// Errors keep their kind across the bus.
	_, err = bus.Call(ctx, nc, protocol.Authenticate, protocol.AuthenticateRequest{Token: "wgl_nope"})
	wantKind(t, err, protocol.Unauthenticated, protocol.CodeInvalidToken)
}
