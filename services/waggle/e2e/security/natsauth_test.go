package security

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// Review finding 14: `--nats-listen` had no authentication. The bus
// carries every request (protocol.CreateToken, history, turn streams), so
// anyone who could reach the port minted tokens and read every team's
// conversations. The listener now admits only clients that prove the
// nkey in <data-dir>/nats.nk.

// natsauthCredentials is where waggle serve keeps the listener's
// credentials: an nkey seed file, as the nats CLI's --nkey reads it.
func natsauthCredentials(dataDir string) string { return filepath.Join(dataDir, "nats.nk") }

// natsauthServe runs waggle serve with an embedded NATS listener and
// returns the process and the listener's URL.
func natsauthServe(t *testing.T, opts ...waggletest.ProcOption) (*waggletest.Proc, string) {
	t.Helper()
	addr := waggletest.FreeAddr(t)
	p := waggletest.StartProc(t, waggleBin, append([]waggletest.ProcOption{waggletest.ProcArgs("--nats-listen", addr)}, opts...)...)
	return p, "nats://" + addr
}

// natsauthTeamServe runs a team server (auth required, teams on
// PostgreSQL) with an embedded NATS listener.
func natsauthTeamServe(t *testing.T) (*waggletest.Proc, string) {
	t.Helper()
	return natsauthServe(t, waggletest.ProcArgs("--auth", "required", "--postgres-url", pgtest.URL(t)))
}

// natsauthDial connects to url with opts; the connection closes at the
// end of the test.
func natsauthDial(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second), nats.NoReconnect()}, opts...)...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// natsauthOperator is a connection with the data dir's credentials, the
// way `nats --nkey <data-dir>/nats.nk` connects.
func natsauthOperator(t *testing.T, url, dataDir string) *nats.Conn {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(natsauthCredentials(dataDir))
	if err != nil {
		t.Fatalf("credentials file: %v", err)
	}
	nc, err := natsauthDial(t, url, opt)
	if err != nil {
		t.Fatalf("connect with the data dir's credentials: %v", err)
	}
	return nc
}

// natsauthCLI runs `waggle <args>` with a clean environment whose HOME
// holds no waggle data dir, and returns its exit code, stdout and stderr.
func natsauthCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, waggleBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	default:
		t.Fatalf("run waggle %v: %v", args, err)
		return 0, "", ""
	}
}

// An attacker who can reach the listener connects without credentials:
// the server refuses the connection.
func TestNATSListenerRefusesClientWithoutCredentials(t *testing.T) {
	_, url := natsauthServe(t)
	nc, err := natsauthDial(t, url)
	if err == nil {
		t.Fatalf("an anonymous client connected to %s (server %s)", url, nc.ConnectedServerId())
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("anonymous connect: %v, want an authorization violation", err)
	}
}

// An attacker presents an nkey of their own (or a guessed user and
// password): the server refuses both.
func TestNATSListenerRefusesWrongCredentials(t *testing.T) {
	_, url := natsauthServe(t)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	file := filepath.Join(t.TempDir(), "attacker.nk")
	if err := os.WriteFile(file, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	opt, err := nats.NkeyOptionFromSeed(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsauthDial(t, url, opt); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect with a foreign nkey: %v, want an authorization violation", err)
	}
	if _, err := natsauthDial(t, url, nats.UserInfo("waggle", "waggle")); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect with a guessed password: %v, want an authorization violation", err)
	}
}

// The operator's own client (`nats --nkey <data-dir>/nats.nk`) connects
// and reaches the services.
func TestNATSListenerAdmitsDataDirCredentials(t *testing.T) {
	p, url := natsauthServe(t)
	nc := natsauthOperator(t, url, p.DataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.Call(ctx, nc, protocol.ListWorkspaces, protocol.Empty{}); err != nil {
		t.Fatalf("list workspaces over the authenticated connection: %v", err)
	}
}

// The credentials file is readable by its owner only: another local user
// cannot copy it.
func TestNATSCredentialsFileIsOwnerOnly(t *testing.T) {
	p, _ := natsauthServe(t)
	st, err := os.Stat(natsauthCredentials(p.DataDir))
	if err != nil {
		t.Fatalf("credentials file: %v", err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Fatalf("credentials file mode %o, want 600", mode)
	}
}

// An attacker runs the operator CLI against the listener without the
// server's data dir: no token is minted.
func TestTokenCLIWithoutCredentialsMintsNothing(t *testing.T) {
	p, url := natsauthTeamServe(t)
	code, out, errOut := natsauthCLI(t, "token", "create", "mallory", "--nats-url", url)
	if code == 0 {
		t.Fatalf("waggle token create without credentials succeeded: %s", out)
	}
	if !strings.Contains(errOut, "Authorization Violation") {
		t.Errorf("stderr %q does not say the server refused the credentials", errOut)
	}
	nc := natsauthOperator(t, url, p.DataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	toks, err := bus.Call(ctx, nc, protocol.ListTokens, protocol.TokenListRequest{User: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	if len(toks.Tokens) != 0 {
		t.Fatalf("mallory has tokens: %+v", toks.Tokens)
	}
}

// The operator bootstraps a team server with the CLI, which finds the
// credentials in the server's data dir, and the token it prints works.
func TestTokenCLIWithDataDirCreatesToken(t *testing.T) {
	p, url := natsauthTeamServe(t)
	code, out, errOut := natsauthCLI(t, "token", "create", "olga", "--data-dir", p.DataDir, "--nats-url", url)
	if code != 0 {
		t.Fatalf("waggle token create: exit %d: %s", code, errOut)
	}
	var tok protocol.TokenCreated
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create printed %q (%v)", out, err)
	}
	resp := p.Do(t, http.MethodGet, "/api/workspaces", nil, "Authorization", "Bearer "+tok.Token)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/workspaces with the new token: %d", resp.StatusCode)
	}
}

// `waggle nats --listen --store-dir` (a standalone server without a
// config file, whose users would otherwise be none) refuses an anonymous
// client too, and admits the key it made in its store dir.
func TestStandaloneNATSRefusesClientWithoutCredentials(t *testing.T) {
	addr, store := waggletest.FreeAddr(t), filepath.Join(t.TempDir(), "nats")
	cmd := exec.Command(waggleBin, "nats", "--listen", addr, "--store-dir", store)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
	})
	url, key := "nats://"+addr, filepath.Join(store, "nats.nk")
	waitfor.Within(30*time.Second).NoError(t, "waggle nats accepts its own key", func() error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("waggle nats exited (%v): %s", err, out.String())
		default:
		}
		opt, err := nats.NkeyOptionFromSeed(key)
		if err != nil {
			return err
		}
		nc, err := natsauthDial(t, url, opt)
		if err == nil {
			nc.Close()
		}
		return err
	})
	if _, err := natsauthDial(t, url); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("anonymous connect to waggle nats: %v, want an authorization violation", err)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("waggle nats credentials file: %v %v, want mode 600", st, err)
	}
}
