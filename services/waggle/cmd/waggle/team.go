package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/flagext"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
)

const teamUsage = `Usage: waggle team <command> [flags]

Manage the teams of a team server. The CLI talks to the running server's
teams service over NATS as the operator (it may do anything), so it also
bootstraps a fresh server: create a team with an owner, then a token for
that owner.

Commands:
  create <team> [--name NAME] [--owner USER]   create a team (id: lower-case slug)
  list                                         list every team
  show <team>                                  show a team, its members and policies
  add-member <team> <user> [--role ROLE]       add a member (role default: member)
  remove-member <team> <user>                  remove a member
  set-role <team> <user> <role>                change a member's role (owner, admin, member, viewer)
  set-policy <team> <role> [--block a,b]       replace the tools blocked for a role (no --block: none)
             [--code-tools on|off]             and enable or disable code-running tools (bash)

Flags (every command):
  --nats-url URL    the server's NATS (env WAGGLE_NATS_URL; default nats://127.0.0.1:4222)
  --data-dir DIR    the server's data dir, whose nats.nk authenticates to its --nats-listen
                    (env WAGGLE_DATA_DIR; default ~/.waggle)
  --nats-nkey FILE  an nkey seed file to authenticate with instead (env WAGGLE_NATS_NKEY)
  --timeout D       request timeout (default 10s)
`

const tokenUsage = `Usage: waggle token <command> [flags]

Commands:
  create <user> [--name NAME]   issue a token for user (created if new); printed once
  list <user>                   list user's tokens (never their secrets)
  revoke <id>                   revoke a token at once

Flags: --nats-url URL (env WAGGLE_NATS_URL), --data-dir DIR (env WAGGLE_DATA_DIR),
       --nats-nkey FILE (env WAGGLE_NATS_NKEY), --timeout D; see waggle team --help
`

// cliFlags are the flags every team/token command accepts.
type cliFlags struct {
	fs        *flag.FlagSet
	natsURL   string
	dataDir   string
	natsNkey  string
	timeout   time.Duration
	name      string
	owner     string
	role      string
	block     string
	codeTools string
}

func newCLIFlags(name string, stderr io.Writer) *cliFlags {
	c := &cliFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(stderr)
	def := os.Getenv("WAGGLE_NATS_URL")
	if def == "" {
		def = nats.DefaultURL
	}
	c.fs.StringVar(&c.natsURL, "nats-url", def, "NATS URL of the server")
	home, _ := os.UserHomeDir()
	flagext.PathVar(c.fs, &c.dataDir, "data-dir", envOr("WAGGLE_DATA_DIR", filepath.Join(home, ".waggle")),
		"the server's data directory (its nats.nk authenticates to the server's --nats-listen)")
	flagext.PathVar(c.fs, &c.natsNkey, "nats-nkey", os.Getenv("WAGGLE_NATS_NKEY"), "nkey seed file to authenticate with (default: <data-dir>/nats.nk when it exists)")
	c.fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "request timeout")
	c.fs.StringVar(&c.name, "name", "", "display name")
	c.fs.StringVar(&c.owner, "owner", "", "first owner of a new team")
	c.fs.StringVar(&c.role, "role", protocol.TeamRoleMember, "member role")
	c.fs.StringVar(&c.block, "block", "", "comma-separated tools to block")
	c.fs.StringVar(&c.codeTools, "code-tools", "", "on or off")
	return c
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return flagext.ExpandHome(v)
	}
	return def
}

// credentials is the nats.Option that authenticates the CLI: --nats-nkey,
// else the data dir's nats.nk when it exists and the URL carries no user
// of its own (an external cluster's), else an option that adds nothing.
func (c *cliFlags) credentials() (nats.Option, error) {
	file := c.natsNkey
	if file == "" {
		if hasUser(c.natsURL) {
			return noOption, nil
		}
		file = app.NATSCredentials(c.dataDir)
		if _, err := os.Stat(file); err != nil {
			return noOption, nil
		}
	}
	opt, err := embednats.ClientOption(file)
	if err != nil {
		return nil, err
	}
	return opt, nil
}

func noOption(*nats.Options) error { return nil }

// hasUser reports whether any of the comma-separated NATS URLs carries a
// user (nats://user:pass@host), which nats.go then authenticates with.
func hasUser(urls string) bool {
	for _, u := range strings.Split(urls, ",") {
		if p, err := url.Parse(strings.TrimSpace(u)); err == nil && p.User != nil {
			return true
		}
	}
	return false
}

// parse accepts flags before, between and after positional arguments.
func (c *cliFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// teamCmd runs `waggle team …`.
func teamCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, teamUsage)
		return boolExit(len(args) == 0)
	}
	want := map[string]int{"create": 1, "list": 0, "show": 1, "add-member": 2, "remove-member": 2, "set-role": 3, "set-policy": 2}
	return runCLI("team", args, want, teamUsage, stdout, stderr, func(ctx context.Context, nc *nats.Conn, f *cliFlags, a []string) (any, error) {
		switch args[0] {
		case "create":
			return bus.Call(ctx, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: a[0], Name: f.name, Owner: f.owner})
		case "list":
			return bus.Call(ctx, nc, protocol.ListTeams, protocol.TeamListRequest{})
		case "show":
			return bus.Call(ctx, nc, protocol.GetTeam, protocol.TeamRef{Team: a[0]})
		case "add-member":
			return bus.Call(ctx, nc, protocol.PutMember,
				protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: a[0]}, User: a[1], Role: f.role})
		case "remove-member":
			return bus.Call(ctx, nc, protocol.RemoveMember,
				protocol.MemberRef{TeamRef: protocol.TeamRef{Team: a[0]}, User: a[1]})
		case "set-role":
			return bus.Call(ctx, nc, protocol.PutMember,
				protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: a[0]}, User: a[1], Role: a[2]})
		case "set-policy":
			return setPolicy(ctx, nc, f, a[0], a[1])
		}
		return nil, nil
	})
}

func setPolicy(ctx context.Context, nc *nats.Conn, f *cliFlags, team, role string) (any, error) {
	tools := []string{}
	for _, t := range strings.Split(f.block, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tools = append(tools, t)
		}
	}
	if f.codeTools != "" {
		on := f.codeTools == "on"
		if !on && f.codeTools != "off" {
			return nil, errors.New("--code-tools must be on or off")
		}
		if _, err := bus.Call(ctx, nc, protocol.UpdateTeam,
			protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Team: team}, CodeTools: &on}); err != nil {
			return nil, err
		}
	}
	return bus.Call(ctx, nc, protocol.SetPolicy,
		protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Team: team}, Role: role, BlockedTools: tools})
}

// tokenCmd runs `waggle token …`.
func tokenCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, tokenUsage)
		return boolExit(len(args) == 0)
	}
	want := map[string]int{"create": 1, "list": 1, "revoke": 1}
	return runCLI("token", args, want, tokenUsage, stdout, stderr, func(ctx context.Context, nc *nats.Conn, f *cliFlags, a []string) (any, error) {
		switch args[0] {
		case "create":
			return bus.Call(ctx, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: a[0], Name: f.name})
		case "list":
			return bus.Call(ctx, nc, protocol.ListTokens, protocol.TokenListRequest{User: a[0]})
		case "revoke":
			return bus.Call(ctx, nc, protocol.RevokeToken, protocol.TokenRevokeRequest{ID: a[0]})
		}
		return nil, nil
	})
}

func boolExit(usageError bool) int {
	if usageError {
		return 2
	}
	return 0
}

// runCLI parses a sub-command's arguments, connects to NATS, runs fn and
// prints its reply as JSON.
func runCLI(group string, args []string, want map[string]int, usage string, stdout, stderr io.Writer,
	fn func(ctx context.Context, nc *nats.Conn, f *cliFlags, a []string) (any, error)) int {
	n, ok := want[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "waggle %s: unknown command %q\n\n%s", group, args[0], usage)
		return 2
	}
	f := newCLIFlags("waggle "+group+" "+args[0], stderr)
	pos, err := f.parse(args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		return 2
	}
	if len(pos) != n {
		fmt.Fprintf(stderr, "waggle %s %s: want %d argument(s), got %d\n\n%s", group, args[0], n, len(pos), usage)
		return 2
	}
	opts := []nats.Option{nats.Name("waggle-cli"), nats.Timeout(f.timeout)}
	cred, err := f.credentials()
	if err != nil {
		fmt.Fprintf(stderr, "waggle %s: %v\n", group, err)
		return 1
	}
	nc, err := nats.Connect(f.natsURL, append(opts, cred)...)
	if errors.Is(err, nats.ErrNkeysNotSupported) && f.natsNkey == "" {
		// The data dir's key was only a default, and this server (an
		// external one without nkeys) takes none.
		nc, err = nats.Connect(f.natsURL, opts...)
	}
	if err != nil {
		fmt.Fprintf(stderr, "waggle %s: connect to %s: %v\n", group, f.natsURL, err)
		if errors.Is(err, nats.ErrAuthorization) {
			fmt.Fprintf(stderr, "the server wants credentials: give --data-dir of the server (its nats.nk) or --nats-nkey\n")
		}
		return 1
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	rep, err := fn(ctx, nc, f, pos)
	if err != nil {
		if e := protocol.AsError(err); e != nil && e.Kind == protocol.Unavailable {
			fmt.Fprintf(stderr, "waggle %s: no teams service answered (is the server running with WAGGLE_POSTGRES_URL?)\n", group)
			return 1
		}
		fmt.Fprintf(stderr, "waggle %s %s: %v\n", group, args[0], err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintf(stderr, "waggle %s: %v\n", group, err)
		return 1
	}
	return 0
}
