//go:build !unix

package main

// raiseOpenFiles does nothing where there is no open-files limit to raise.
func raiseOpenFiles() (uint64, error) { return 0, nil }
