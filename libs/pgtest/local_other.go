//go:build !linux

package pgtest

import "errors"

var errLocalUnsupported = errors.New("a throwaway local cluster is only supported on Linux")

// startLocal is Linux-only (it relies on the parent-death signal to stop
// the server with the test process).
func startLocal() (string, error) { return "", errLocalUnsupported }

type localCluster struct{}

func newLocalCluster() (*localCluster, error) { return nil, errLocalUnsupported }
func (c *localCluster) url(string) string     { return "" }
func (c *localCluster) start() error          { return errLocalUnsupported }
func (c *localCluster) stop() error           { return errLocalUnsupported }
func (c *localCluster) remove()               {}
