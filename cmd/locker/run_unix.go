//go:build unix

package main

import (
	"os"
	"syscall"
)

// forwardedSignals are the signals locker run passes on to its command (and that end the wait
// for the lock, with exit status 128+N).
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalNumber is sig's number (SIGINT: 2), or 0 for a signal that is not a syscall.Signal.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// signalName is the name of sig as kill -l gives it, with "SIG": "SIGINT".
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return sig.String()
}

// shellCommand is the command line that runs line through the shell, for -c.
func shellCommand(line string) []string { return []string{"/bin/sh", "-c", line} }
