//go:build unix

package app

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// dataDirLock is the lock a `waggle serve` with an embedded NATS server
// holds on its data dir: the embedded JetStream store under <data-dir>/nats
// is one process's, and a second server on it would share the first one's
// store and wait forever in its own. The lock is flock(2) on
// <data-dir>/waggle.lock, so it goes away with the process however that
// ends (no stale lock after kill -9); the file holds the holder's pid for
// the message the second one prints.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the data dir's lock or says who holds it.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, "waggle.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: cannot open its lock: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s: cannot lock it: %w", dir, err)
		}
		holder := "another process"
		if data, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(string(bytes.TrimSpace(data))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("the data directory %s is in use by another waggle serve (%s): stop it, or give this one another --data-dir", dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release gives the lock up (closing the file drops the flock).
func (l *dataDirLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
