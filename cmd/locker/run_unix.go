//go:build unix

package main

import (
	"os"
	"syscall"
)

// forwardedSignals are the signals locker run passes on to its command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// terminate asks p to exit.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// exitStatus is the exit status of a command as a shell reports it: 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
