//go:build !unix

package main

import "os"

// forwardedSignals are the signals locker run handles; outside Unix, only the interrupt (which
// ends the wait for the lock; os.Process.Signal cannot send it to the command there).
var forwardedSignals = []os.Signal{os.Interrupt}

// exitStatus is the exit status of a process.
func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

// fromTerminal reports whether the command has had sig already, from the terminal: never
// here, where every signal that locker run handles is forwarded.
func fromTerminal(os.Signal) bool { return false }

// signalNumber is the number of sig as on Unix: 2 for the interrupt, the only signal here.
func signalNumber(sig os.Signal) int {
	if sig == os.Interrupt {
		return 2
	}
	return 0
}

// signalName is the name of sig: "SIGINT" for the interrupt.
func signalName(sig os.Signal) string {
	if sig == os.Interrupt {
		return "SIGINT"
	}
	return sig.String()
}

// shellCommand is the command line that runs line through the shell, for -c: cmd.exe /C.
func shellCommand(line string) []string { return []string{"cmd.exe", "/C", line} }
