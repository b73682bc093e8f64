//go:build !unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// superviseMain is not used outside Unix: locker run starts the command itself there.
func superviseMain() int {
	fmt.Fprintln(os.Stderr, "locker run: the supervisor is for Unix only")
	return exitCannotRun
}

// direct is the command started by locker run itself, without a supervisor: outside Unix, a
// locker run that is killed leaves its command running (the lease then expires after --ttl).
type direct struct{ cmd *exec.Cmd }

// startCommand starts argv with env and s's streams.
func startCommand(s *streams, cfg runConfig, argv, env []string) (runningCommand, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.in, s.out, s.err
	cmd.Env = env
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &direct{cmd}, nil
}

// Signal does nothing: os.Process.Signal cannot send signals outside Unix.
func (d *direct) Signal(os.Signal) {}

// Terminate kills the command at once: there is no SIGTERM to ask with.
func (d *direct) Terminate(time.Duration) { _ = d.cmd.Process.Kill() }

// Wait waits for the command and returns its exit status.
func (d *direct) Wait() (int, error) {
	err := d.cmd.Wait()
	if d.cmd.ProcessState == nil {
		return exitCannotRun, err
	}
	return exitStatus(d.cmd.ProcessState), nil
}
