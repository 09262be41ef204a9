//go:build !linux

package pgtest

import "errors"

// startLocal is Linux-only (it relies on the parent-death signal to stop
// the server with the test process).
func startLocal() (string, error) {
	return "", errors.New("a throwaway local cluster is only supported on Linux")
}
