package embednats

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// CredentialsFileName is the credentials file of an embedded server in
// its data directory (waggle serve uses <data-dir>/nats.nk). The file holds
// an nkey user seed: `nats --nkey <file>` and ClientOption read it.
const CredentialsFileName = "nats.nk"

// Connection types of nats-server (jwt.ConnectionType*), which the nkey
// users below are limited to.
const (
	connTCP       = "STANDARD"
	connInProcess = "IN_PROCESS"
)

// loadOrCreateCredentials returns the public key of the nkey seed in path,
// creating the file (mode 0600) with a new random seed when it does not
// exist. An existing file is never rewritten, so a second start, or a
// client reading it meanwhile, sees the same key. A file that other users
// can read is refused: its key must be taken as known to them.
func loadOrCreateCredentials(path string) (string, error) {
	pub, err := readCredentials(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return pub, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("embednats: new nkey: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("embednats: new nkey: %w", err)
	}
	if err := writeNew(path, append(seed, '\n')); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first: use theirs.
			return readCredentials(path)
		}
		return "", err
	}
	return kp.PublicKey()
}

// readCredentials checks the credentials file's mode and returns its
// seed's public key.
func readCredentials(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("embednats: credentials file %s is open to other users (mode %o): chmod 600 it, or delete it to have a new key made at start",
			path, st.Mode().Perm())
	}
	kp, err := parseSeedFile(path)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// writeNew writes data to a new file at path (0600), atomically: the file
// appears complete or not at all, and an existing one is left alone
// (fs.ErrExist).
func writeNew(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nats-credentials-*")
	if err != nil {
		return fmt.Errorf("embednats: write credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600; Chmod says so for the reader.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("embednats: write credentials: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("embednats: write credentials: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("embednats: write credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("embednats: write credentials: %w", err)
	}
	// A hard link, unlike a rename, never replaces a file that is there.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("embednats: write credentials: %w", err)
	}
	return nil
}

func parseSeedFile(path string) (nkeys.KeyPair, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("embednats: read credentials: %w", err)
	}
	defer clear(data)
	kp, err := nkeys.ParseDecoratedNKey(bytes.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("embednats: credentials file %s: %w", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		kp.Wipe()
		return nil, fmt.Errorf("embednats: credentials file %s does not hold an nkey user seed", path)
	}
	return kp, nil
}

// ClientOption reads the nkey seed file at path (an embedded server's
// credentials file) and returns the nats.Option that authenticates with
// it. The seed is read once and kept in memory, so a connection keeps
// reconnecting with the key it started with even if the file is replaced.
func ClientOption(path string) (nats.Option, error) {
	kp, err := parseSeedFile(path)
	if err != nil {
		return nil, err
	}
	return keyOption(kp)
}

func keyOption(kp nkeys.KeyPair) (nats.Option, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("embednats: nkey: %w", err)
	}
	return nats.Nkey(pub, kp.Sign), nil
}

// authOptions turns on authentication in opts: the credentials file's
// key may connect over TCP, and a key made for this start alone (never
// written anywhere) may connect in process. It returns the in-process
// key's client option.
func (s *Server) authOptions(opts *server.Options) (nats.Option, error) {
	filePub, err := loadOrCreateCredentials(s.cfg.CredentialsFile)
	if err != nil {
		return nil, err
	}
	internal, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("embednats: new nkey: %w", err)
	}
	internalPub, err := internal.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("embednats: new nkey: %w", err)
	}
	opts.Nkeys = []*server.NkeyUser{
		{Nkey: filePub, AllowedConnectionTypes: map[string]struct{}{connTCP: {}}},
		{Nkey: internalPub, AllowedConnectionTypes: map[string]struct{}{connInProcess: {}}},
	}
	return keyOption(internal)
}
