package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/services/waggle/app"
)

func TestTeamCLIArguments(t *testing.T) {
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"team"}, 2, ""},
		{[]string{"team", "bogus"}, 2, `unknown command "bogus"`},
		{[]string{"team", "create"}, 2, "want 1 argument(s), got 0"},
		{[]string{"team", "set-role", "acme", "bob"}, 2, "want 3 argument(s), got 2"},
		{[]string{"token", "revoke"}, 2, "want 1 argument(s), got 0"},
		{[]string{"team", "add-member", "acme", "bob", "--role"}, 2, "flag needs an argument"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		var code int
		if c.args[0] == "team" {
			code = teamCmd(c.args[1:], &out, &errOut)
		} else {
			code = tokenCmd(c.args[1:], &out, &errOut)
		}
		if code != c.code || !strings.Contains(errOut.String(), c.err) {
			t.Errorf("%v: code %d, stderr %q; want %d containing %q", c.args, code, errOut.String(), c.code, c.err)
		}
	}
}

func TestTeamCLIWithoutTeamsService(t *testing.T) {
	ns := natstest.Start(t)
	var out, errOut bytes.Buffer
	code := teamCmd([]string{"add-member", "acme", "--nats-url", ns.URL(), "--data-dir", t.TempDir(), "bob", "--role", "viewer"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "no teams service answered") {
		t.Fatalf("code %d, stderr %q", code, errOut.String())
	}
}

// The data dir's key is a default: a server that takes no nkeys (an
// external one) is still reached without it. A key given explicitly is
// not dropped.
func TestTeamCLIDataDirKeyIsOptional(t *testing.T) {
	ns := natstest.Start(t)
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	if err := os.WriteFile(app.NATSCredentials(dir), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := teamCmd([]string{"list", "--nats-url", ns.URL(), "--data-dir", dir}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "no teams service answered") {
		t.Fatalf("with the data dir's key: code %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	code = teamCmd([]string{"list", "--nats-url", ns.URL(), "--nats-nkey", app.NATSCredentials(dir)}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "nkeys not supported") {
		t.Fatalf("with --nats-nkey: code %d, stderr %q", code, errOut.String())
	}
}
