//go:build unix

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwardedSignals are the signals locker run passes on to its command (and that end the wait
// for the lock, with exit status 128+N).
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// fromTerminal reports whether the command has had sig already, from the terminal: sig is one
// that a terminal sends to its foreground process group (SIGINT for Ctrl-C, SIGQUIT for Ctrl-\),
// and locker run is in that group now, where the supervisor and the command are too. Decided
// when the signal arrives, as the foreground group changes with job control (fg, bg). Such a
// signal sent to locker run alone (kill -INT) is taken for the terminal's too.
func fromTerminal(sig os.Signal) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		return false
	}
	pgrp, ok := foregroundGroup()
	return ok && pgrp == syscall.Getpgrp()
}

// foregroundGroup returns the foreground process group of the controlling terminal, through
// /dev/tty (opened without waiting, for the ioctl only) or else stdin; false when there is none,
// or it cannot be known.
func foregroundGroup() (int, bool) {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		defer unix.Close(fd)
	} else {
		fd = 0 // stdin: the ioctl fails unless it is the controlling terminal
	}
	v, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return 0, false
	}
	// The kernel writes a pid_t, 32 bits, at the start of the int that IoctlGetInt passes and
	// zeroed: on a 64-bit big-endian machine, into its upper half.
	pgrp := int(int32(v))
	if pgrp == 0 {
		pgrp = int(int32(uint64(v) >> 32))
	}
	return pgrp, pgrp > 0
}

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
