package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/hashlock/locker"
)

var runCommand = command{
	name:    "run",
	summary: "run a command while holding a lock: flock(1) across machines",
	args:    "-- command [args...]",
	rawArgs: true,
	help: `Takes the lock on --key, waiting up to --wait for it, then runs the command with the
same stdin, stdout and stderr while the watchdog renews the lease (every --ttl/3), and
releases the lock when the command exits. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded
to the command (at a terminal, Ctrl-C reaches it from the terminal as well).

With --fencing, the command finds the lock's fencing token in $LOCKER_FENCING_TOKEN: a
number that grows with every new holder of the key. Pass it with the writes the command makes,
and have the storage refuse a token lower than one it has already seen.

If the lock is lost while the command runs (the lease could not be renewed: the lock was
forced away, or Redis was unreachable until the lease may have expired), it prints
"locker: lock KEY lost; terminating the command", sends the command SIGTERM, then SIGKILL
if it has not exited after --grace, and exits with status 70.

Exit status:
  the command's own   when it exits normally (0 included)
  128+N               the command was killed by signal N
  70                  the lock was lost while the command ran
  75                  the lock was not obtained within --wait (EX_TEMPFAIL, as flock -w)
  126                 the command could not be started
  127                 the command was not found
  1                   an error from Redis or the library before the command started
  2                   a usage error (no --key, no command, no Redis URL…)`,
	setup: func(fs *flag.FlagSet) func(context.Context, *streams, []string) error {
		cfg := runConfig{TTL: locker.DefaultTTL, Wait: time.Minute, Grace: 10 * time.Second}
		fs.StringVar(&cfg.Key, "key", "", "the lock's `key` (required)")
		fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "lease length; renewed every ttl/3, so a crashed holder blocks others for at most about ttl")
		fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long to wait for the lock: 0 tries once, a negative duration (-1s) waits forever")
		fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "after the lock is lost, how long the command has between SIGTERM and SIGKILL")
		fs.BoolVar(&cfg.Fencing, "fencing", false, "take a fencing token and pass it to the command as $"+tokenEnv+" (keeps a counter key per lock key on the server)")
		cf := addConnFlags(fs, false)
		return func(ctx context.Context, s *streams, argv []string) error {
			if err := cfg.validate(argv); err != nil {
				return err
			}
			backend, err := cf.connect(ctx)
			if err != nil {
				return err
			}
			defer backend.close()
			return runLocked(ctx, s, cfg, backend.Locker, argv)
		}
	},
}

type runConfig struct {
	Key   string
	TTL   time.Duration // lease length
	Wait  time.Duration // how long to wait for the lock: 0 once, < 0 forever
	Grace time.Duration // between SIGTERM and SIGKILL when the lock is lost
	// Fencing takes a fencing token and passes it to the command in tokenEnv.
	Fencing bool
}

// tokenEnv is the environment variable that carries the lease's fencing token to the command.
const tokenEnv = "LOCKER_FENCING_TOKEN"

func (c runConfig) validate(argv []string) error {
	switch {
	case c.Key == "":
		return usagef("--key is required")
	case len(argv) == 0:
		return usagef("no command given: locker run --key KEY -- command [args...]")
	case c.TTL < locker.MinTTL:
		return usagef("--ttl %v: must be at least %v", c.TTL, locker.MinTTL)
	case c.Grace < 0:
		return usagef("--grace %v: must not be negative", c.Grace)
	}
	return nil
}

// runLocked holds the lock on cfg.Key while the command argv runs, and returns an *exitError
// with the exit status (nil for 0).
func runLocked(ctx context.Context, s *streams, cfg runConfig, backend locker.Locker, argv []string) error {
	opts := []locker.Option{locker.WithTTL(cfg.TTL)}
	if cfg.Fencing {
		opts = append(opts, locker.WithFencing())
	}
	client := locker.New(backend, opts...)
	defer client.Close()
	lease, err := acquire(ctx, client, cfg)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	code, lost, err := supervise(s, cfg, lease, argv, sigs)
	if lost {
		// supervise said so when it happened. No Unlock: the hold is gone, or Redis is out of
		// reach and the lease runs out by itself.
		return &exitError{exitLockLost, nil}
	}
	switch uerr := lease.Unlock(); {
	case errors.Is(uerr, locker.ErrNotHeld):
		return &exitError{exitLockLost, fmt.Errorf("lock %s was lost while the command ran, unnoticed until it exited (status %d): %w", cfg.Key, code, uerr)}
	case uerr != nil:
		fmt.Fprintf(s.err, "locker run: %v (the lock expires after --ttl %v)\n", uerr, cfg.TTL)
	}
	if err != nil || code != 0 {
		return &exitError{code, err}
	}
	return nil
}

// acquire takes the lock, waiting as cfg.Wait says. A refusal is an *exitError with
// exitNotObtained.
func acquire(ctx context.Context, client *locker.Client, cfg runConfig) (*locker.Lease, error) {
	var (
		lease *locker.Lease
		err   error
	)
	switch {
	case cfg.Wait == 0:
		lease, err = client.TryLock(ctx, cfg.Key)
	case cfg.Wait > 0:
		wctx, cancel := context.WithTimeout(ctx, cfg.Wait)
		defer cancel()
		lease, err = client.Lock(wctx, cfg.Key)
	default:
		lease, err = client.Lock(ctx, cfg.Key)
	}
	if nerr, ok := errors.AsType[*locker.NotObtainedError](err); ok && ctx.Err() == nil {
		return nil, &exitError{exitNotObtained, fmt.Errorf("lock %s not obtained within --wait %v: held by another owner, lease %v left", cfg.Key, cfg.Wait, nerr.TTL)}
	}
	if err != nil {
		return nil, err
	}
	// The lease's context derives from the ctx of the Lock, which ends at --wait and at an
	// interrupt; the command's must not. Re-enter through a context that keeps the ownership
	// but not the cancellation, keep that hold and release the first.
	held, err := client.Lock(context.WithoutCancel(lease.Context()), cfg.Key)
	uerr := lease.Unlock()
	if err != nil {
		return nil, err
	}
	if uerr != nil {
		_ = held.Unlock()
		return nil, uerr
	}
	return held, nil
}

// supervise runs argv while lease is held: it forwards sigs to the command and terminates the
// command when the lease ends. It returns the command's exit status, whether the lease was lost,
// and an error when the command could not be started (with status 126 or 127).
func supervise(s *streams, cfg runConfig, lease *locker.Lease, argv []string, sigs <-chan os.Signal) (code int, lost bool, err error) {
	if lease.Context().Err() != nil {
		fmt.Fprintf(s.err, "locker: lock %s lost before the command started\n", cfg.Key)
		return 0, true, nil
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.in, s.out, s.err
	if cfg.Fencing {
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", tokenEnv, lease.Token()))
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound, false, err
		}
		return exitCannotRun, false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	ended := lease.Context().Done()
	var kill <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-ended:
			ended, lost = nil, true
			fmt.Fprintf(s.err, "locker: lock %s lost; terminating the command (SIGTERM, then SIGKILL after %v)\n", cfg.Key, cfg.Grace)
			_ = terminate(cmd.Process)
			t := time.NewTimer(cfg.Grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(s.err, "locker: the command did not exit within %v of SIGTERM; sending SIGKILL\n", cfg.Grace)
			_ = cmd.Process.Kill()
		case werr := <-done:
			if cmd.ProcessState == nil {
				return 1, lost, werr
			}
			return exitStatus(cmd.ProcessState), lost, nil
		}
	}
}
