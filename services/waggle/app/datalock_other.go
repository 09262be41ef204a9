//go:build !unix

package app

// dataDirLock is a no-op where flock(2) does not exist: a second server
// on the same data dir is not detected there.
type dataDirLock struct{}

func lockDataDir(string) (*dataDirLock, error) { return &dataDirLock{}, nil }

func (*dataDirLock) release() {}
