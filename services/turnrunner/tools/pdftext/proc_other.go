//go:build !linux

package pdftext

import "os/exec"

// setProcAttr: elsewhere a worker ends at its own time limit.
func setProcAttr(*exec.Cmd) {}

// limitResources: elsewhere the inflate limit and the time limit bound a
// worker.
func limitResources() {}
