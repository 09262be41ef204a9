package pdftext

import (
	"os/exec"
	"syscall"
)

// maxAddressSpace bounds a worker's memory: far above what a document
// within the inflate limit needs, far below what would starve the host.
const maxAddressSpace = 4 << 30

// setProcAttr makes the worker die with the runner. (Strictly with the OS
// thread that started it, which Go keeps for the life of the process: only
// a thread locked by an exiting goroutine ends.)
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// limitResources caps the worker's address space: past it allocations
// fail and the worker dies, which Text reports as an unreadable PDF.
func limitResources() {
	lim := syscall.Rlimit{Cur: maxAddressSpace, Max: maxAddressSpace}
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &lim)
}
