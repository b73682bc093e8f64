//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// supervisorPath is the binary to start as the supervisor: this one.
func supervisorPath() (string, error) { return os.Executable() }

// setSubreaper does nothing: outside Linux there is no child subreaper here, so the processes
// that the command orphans re-parent to init and escape the supervisor.
func setSubreaper() error { return nil }

// commandAttr is nil: outside Linux there is no parent-death signal, so the command outlives a
// supervisor that is killed.
func commandAttr() *syscall.SysProcAttr { return nil }

// descendants finds none: without /proc, the supervisor ends only the command itself.
func descendants() []int { return nil }
