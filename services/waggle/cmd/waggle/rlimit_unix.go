//go:build unix

package main

import "syscall"

// raiseOpenFiles lifts the soft open-files limit to the hard one: every
// streaming turn holds a client connection and a model connection, and
// the usual soft limit (1,024) would cap a server at a few hundred turns.
// It returns the limit in force.
func raiseOpenFiles() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return lim.Cur, err
		}
	}
	return lim.Cur, nil
}
