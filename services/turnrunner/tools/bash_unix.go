//go:build unix

package tools

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the shell in its own process group and makes
// cancellation kill the whole group, so a timed-out `sleep 100 | cat` or a
// backgrounded child dies with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killProcessGroup kills whatever is left of the command's group after the
// shell has exited (background jobs). The group id is the shell's pid and
// stays reserved while any member lives; with none left the call is an
// ignored ESRCH (short of the kernel recycling that pid as a new group
// leader within microseconds, the race every process-group killer accepts).
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
