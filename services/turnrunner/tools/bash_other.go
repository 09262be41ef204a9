//go:build !unix

package tools

import "os/exec"

// setProcessGroup: without Unix process groups only the shell itself is
// killed on cancellation (exec's default).
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup has nothing to do without process groups.
func killProcessGroup(*exec.Cmd) {}
