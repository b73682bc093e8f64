//go:build !linux

package redistest

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: the process-group and parent-death settings used on
// Linux are not portable, so elsewhere servers are only killed in cleanup.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killProcess kills p (SIGKILL on Unix).
func killProcess(p *os.Process) { _ = p.Kill() }
