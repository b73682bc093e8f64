package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
)

// supervisorEnv, set in its environment, makes the locker binary locker run's supervisor
// instead of the locker command (see supervise_unix.go). The supervisor removes it from the
// environment of the command.
const supervisorEnv = "_LOCKER_RUN_SUPERVISOR"

// init turns the process into the supervisor when supervisorEnv says so, before main and before
// any flag parsing; also in the test binary, whose TestMain would otherwise run the tests.
func init() {
	if os.Getenv(supervisorEnv) != "" {
		os.Exit(superviseMain())
	}
}

// startFailure is the exit status for a command that could not be started: exitNotFound when it
// does not exist, exitCannotRun otherwise.
func startFailure(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotRun
}
