package embednats_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/embednats"
)

func startWithCredentials(t *testing.T, dir string) *embednats.Server {
	t.Helper()
	s := embednats.New(embednats.Config{StoreDir: filepath.Join(dir, "nats"), Listen: "127.0.0.1:0",
		CredentialsFile: filepath.Join(dir, embednats.CredentialsFileName)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func dial(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second), nats.NoReconnect()}, opts...)...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// With a credentials file, TCP clients need its key, in-process
// connections work with their own, and the file is the owner's alone.
func TestCredentialsRequired(t *testing.T) {
	dir := t.TempDir()
	s := startWithCredentials(t, dir)
	file := filepath.Join(dir, embednats.CredentialsFileName)
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v, want mode 600", st, err)
	}
	if _, err := dial(t, s.ClientURL()); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("anonymous TCP client: %v, want an authorization violation", err)
	}
	opt, err := embednats.ClientOption(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, s.ClientURL(), opt); err != nil {
		t.Fatalf("TCP client with the file's key: %v", err)
	}
	// The nats CLI's --nkey reads the file the same way.
	cli, err := nats.NkeyOptionFromSeed(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, s.ClientURL(), cli); err != nil {
		t.Fatalf("TCP client as nats --nkey: %v", err)
	}
	if _, err := dial(t, "", s.ConnectOption()); err != nil {
		t.Fatalf("in-process connection: %v", err)
	}
}

// A restart reuses the file's key; replacing the file does not break a
// running server (it and its clients keep the key they started with), and
// the next start takes the new key.
func TestCredentialsKeptAndReplaced(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, embednats.CredentialsFileName)
	s := startWithCredentials(t, dir)
	before, _ := os.ReadFile(file)
	opt, err := embednats.ClientOption(file)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop(context.Background())
	s = startWithCredentials(t, dir)
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Fatal("a restart replaced the credentials")
	}
	if _, err := dial(t, s.ClientURL(), opt); err != nil {
		t.Fatalf("the same key after a restart: %v", err)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, "", s.ConnectOption()); err != nil {
		t.Fatalf("in-process connection after the file was removed: %v", err)
	}
	if _, err := dial(t, s.ClientURL(), opt); err != nil {
		t.Fatalf("TCP client with the old key while the server runs: %v", err)
	}
	s.Stop(context.Background())
	s = startWithCredentials(t, dir)
	if _, err := dial(t, s.ClientURL(), opt); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("old key after the file was made anew: %v, want an authorization violation", err)
	}
}

// A credentials file other users can read is refused at start: its key
// must be taken as known.
func TestCredentialsOpenToOthersRefused(t *testing.T) {
	dir := t.TempDir()
	s := startWithCredentials(t, dir)
	s.Stop(context.Background())
	file := filepath.Join(dir, embednats.CredentialsFileName)
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	s = embednats.New(embednats.Config{StoreDir: filepath.Join(dir, "nats"), CredentialsFile: file})
	err := s.Start(context.Background())
	if err == nil {
		s.Stop(context.Background())
		t.Fatal("started with a credentials file of mode 644")
	}
	if !strings.Contains(err.Error(), "open to other users") {
		t.Fatalf("error %q does not say why", err)
	}
}
