//go:build !unix

package main

import "os"

// forwardedSignals are the signals locker run passes on to its command; outside Unix, only the
// interrupt (which os.Process.Signal cannot send there, so in effect none).
var forwardedSignals = []os.Signal{os.Interrupt}

// terminate ends p: outside Unix there is no SIGTERM to ask with, so it kills at once.
func terminate(p *os.Process) error { return p.Kill() }

// exitStatus is the exit status of a command.
func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
