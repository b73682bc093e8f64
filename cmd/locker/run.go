package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Exit codes of locker run other than 0, 1 (the default conflict code) and 2 (usage). See
// docs/locker-run.md, which sets them beside flock(1)'s.
const (
	exitLockLost  = 70  // the lease was lost while the command ran, or the outer hold was gone
	exitCannotRun = 126 // the command could not be started
	exitNotFound  = 127 // the command was not found
)

// defaultConflictCode is the exit code when the lock is not obtained (-n, -w): 1, as flock's.
const defaultConflictCode = 1

// runCommand is "locker run": flock(1) across machines (see docs/locker-run.md).
var runCommand = command{
	name:    "run",
	summary: "run a command while holding a lock: flock(1) across machines",
	args:    "KEY command [args...] | KEY -c 'shell command' | --key KEY -- command [args...]",
	rawArgs: true,
	help: `Takes the lock on KEY, waiting for it as long as it takes (unless -n or -w), runs the
command with the same stdin, stdout and stderr while the watchdog renews the lease every
--ttl/3, and releases the lock when the command and everything it started have exited.
flock(1)'s forms work: -n, -w SECONDS, -E CODE, -c 'shell command', -s, -x, -v.

-s (--shared) takes a shared lock, as flock -s: shared runs on KEY run together, while an
exclusive run (the default, -x) waits for them all and excludes them; once an exclusive run
waits, new shared runs wait behind it. --fair makes the runs that use it get the lock in the
order in which they asked for it (-n with --fair never jumps the queue). A quorum (--redis
given several times) has neither: both are a usage error there.

--limit N makes KEY a semaphore of N permits: the run takes one (Client.Acquire), so that
at most N runs on KEY run at once across machines (a fleet-wide limit for cron jobs and
batch workers), with the same waiting flags, kill-safety, exit codes and --fencing (the
permit's own token). -n when all N are taken exits 1 (or -E) and says how many are taken
and when the soonest lease ends. Every run on KEY must give the same N: another N, or none,
on a semaphore (and --limit on a lock) is refused at once with exit 1 (or -E) and a line
saying why. A nested run with the same --limit re-enters the outer permit. Not with -s or
-x, nor on a quorum (usage errors).

SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the command; SIGINT and SIGQUIT not while
run is in its terminal's foreground, where the command had them from the terminal (Ctrl-C). If
the lock is lost, the command's process tree gets SIGTERM, then SIGKILL after --grace, and run
exits 70. If run itself is killed (kill -9), a supervisor ends the command's tree before the
lease can expire (Linux).
A locker run on the same key and servers inside the command re-enters this hold instead of
waiting: a nested -s inside an exclusive run adds a shared hold to it, while a nested exclusive
run inside a shared one is refused at once (it would upgrade the hold; exit 1 or -E). With
--fencing, the command finds the fencing token in $LOCKER_FENCING_TOKEN (with -s, the token of
the last exclusive holder: shared runs do not advance it).

The Redis password: in the URL (redis://user:password@host or redis://password@host), which
ps shows to every user for as long as run runs; or, for a URL without one, the first line of
--redis-password-file FILE, or $LOCKER_REDIS_PASSWORD, which ps does not show. Unless -o, the
command gets neither $LOCKER_REDIS nor $LOCKER_REDIS_PASSWORD; a locker run inside it without
--redis uses the servers of this hold (from $LOCKER_HOLDS, which carries no password: give it
--redis-password-file if the server needs one).

Exit status: the command's own (128+N when signal N killed it); 1 or -E when the lock was not
obtained (or the key is held with another --limit); 2 usage; 69 Redis or library error before
the command started; 70 lock lost; 126 cannot run; 127 not found; 128+N interrupted by signal
N while waiting (Ctrl-C: 130).

Details, examples and the exit codes beside flock's: docs/locker-run.md.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *streams, []string) error {
		cfg := newRunConfig()
		cfg.define(fs)
		cf := addConnFlags(fs, false)
		return func(ctx context.Context, s *streams, pos []string) error {
			argv, err := cfg.positional(pos)
			if err != nil {
				return err
			}
			if err := cfg.validate(); err != nil {
				return err
			}
			cf.holdKey = cfg.Key
			return runLocked(ctx, s, cfg, cf, argv)
		}
	},
}

// newRunConfig returns the defaults of locker run: wait as long as it takes, as flock(1).
func newRunConfig() runConfig {
	return runConfig{TTL: locker.DefaultTTL, Wait: waitForever, Grace: 10 * time.Second, ConflictCode: defaultConflictCode}
}

// waitForever is runConfig.Wait when locker run waits for the lock as long as it takes.
const waitForever time.Duration = -1

// runConfig is the configuration of one locker run, from its flags and arguments.
type runConfig struct {
	Key    string
	KeySet bool          // --key was given (even empty): the first argument is the command
	TTL    time.Duration // lease length
	Wait   time.Duration // how long to wait for the lock: 0 tries once, waitForever (< 0) waits as long as it takes
	Grace  time.Duration // between SIGTERM and SIGKILL when the command's tree is ended
	// Fencing takes a fencing token and passes it to the command in tokenEnv.
	Fencing bool
	// NonBlock is -n: try once (Wait 0), whatever -w says.
	NonBlock bool
	// ConflictCode is -E: the exit code when the lock is not obtained.
	ConflictCode int
	// Shell is -c: a command line for /bin/sh -c; set tells it from an empty one.
	Shell    string
	ShellSet bool
	// Verbose is -v: say on stderr how long the wait took, and what runs.
	Verbose bool
	// Close is -o: the command does not inherit the hold (a nested run waits for it).
	Close bool
	// OwnerLabel labels the owner token, for locker inspect; default host/pid.
	OwnerLabel string
	// Shared is -s/--shared: a shared (read) hold, with locker.Client.RLock, which other shared
	// runs share and an exclusive run excludes. Default false: exclusive (-x).
	Shared bool
	// Fair is --fair: wait in the key's queue (locker.WithFair), so that runs with --fair get
	// the lock in the order in which they asked for it, and -n never jumps the queue. Default
	// false.
	Fair bool
	// Metrics is --metrics: print a summary of the Client's metrics on stderr at exit.
	Metrics bool
	// Limit is --limit N: take one of the N permits of the semaphore KEY (locker.Client.Acquire)
	// instead of a lock, so that at most N runs on KEY run at once; LimitSet tells --limit 0
	// (refused) from none. Default 0: a lock.
	Limit    int
	LimitSet bool
	// KindSet is -s or -x given (either, even =false), which --limit excludes.
	KindSet bool
}

// tokenEnv is the environment variable that carries the lease's fencing token to the command.
const tokenEnv = "LOCKER_FENCING_TOKEN"

// define registers run's flags on fs: its own and flock(1)'s, each short form beside its long
// ones.
func (c *runConfig) define(fs *flag.FlagSet) {
	fs.Func("key", "the lock's `key`, when not given as the first argument", func(v string) error {
		c.Key, c.KeySet = v, true
		return nil
	})
	fs.DurationVar(&c.TTL, "ttl", c.TTL, "lease length; renewed every ttl/3, so a crashed holder blocks others for at most about ttl")
	wait := (*waitValue)(&c.Wait)
	fs.Var(wait, "w", "wait at most `seconds` for the lock (0.5, 60, or a Go duration: 1m30s); 0 is -n. Default: as long as it takes")
	fs.Var(wait, "wait", "same as -w: wait at most `seconds`")
	fs.Var(wait, "timeout", "same as -w: wait at most `seconds`")
	fs.BoolVar(&c.NonBlock, "n", false, "fail at once if the lock is held")
	fs.BoolVar(&c.NonBlock, "nonblock", false, "same as -n")
	fs.BoolVar(&c.NonBlock, "nb", false, "same as -n")
	fs.IntVar(&c.ConflictCode, "E", c.ConflictCode, "exit `code` when the lock is not obtained (-n, -w), 0 to 255")
	fs.IntVar(&c.ConflictCode, "conflict-exit-code", c.ConflictCode, "same as -E: exit `code` when not obtained")
	shell := &shellValue{c}
	fs.Var(shell, "c", "run the `command` line through /bin/sh -c")
	fs.Var(shell, "command", "same as -c: run the `command` line through /bin/sh -c")
	fs.BoolVar(&c.Verbose, "v", false, "say on stderr how long getting the lock took, and what runs")
	fs.BoolVar(&c.Verbose, "verbose", false, "same as -v")
	shared, exclusive := &kindValue{&c.Shared, &c.KindSet, true}, &kindValue{&c.Shared, &c.KindSet, false}
	fs.Var(shared, "s", "take a shared lock, as flock(1) -s: shared runs on the key run together, an exclusive one excludes them (not on a quorum)")
	fs.Var(shared, "shared", "same as -s")
	fs.Var(exclusive, "x", "take an exclusive lock (the default), as flock(1) -x; the last of -s and -x wins")
	fs.Var(exclusive, "e", "same as -x")
	fs.Var(exclusive, "exclusive", "same as -x")
	fs.BoolVar(&c.Fair, "fair", false, "wait in the key's queue: runs with --fair get the lock in the order in which they asked, and -n never jumps the queue (not on a quorum)")
	fs.BoolVar(&c.Close, "o", false, "do not pass the hold to the command: a nested locker run on the key waits for it")
	fs.BoolVar(&c.Close, "close", false, "same as -o")
	fs.DurationVar(&c.Grace, "grace", c.Grace, "how long the command's processes have between SIGTERM and SIGKILL when they are ended")
	fs.BoolVar(&c.Fencing, "fencing", false, "take a fencing token and pass it to the command as $"+tokenEnv+" (keeps a counter key per lock key on the server)")
	fs.StringVar(&c.OwnerLabel, "owner-label", "", "label the owner token with `text`, for locker inspect (default host/pid)")
	fs.BoolVar(&c.Metrics, "metrics", false, "at exit, print on stderr a summary of the lock's metrics: lock calls by outcome, wait, time held, renewals, lost leases")
	fs.Func("limit", "take one of the `N` permits of the semaphore KEY instead of a lock: at most N runs on KEY at once, across machines (N >= 1; not with -s or -x, not on a quorum)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("want a whole number of permits, 1 or more")
		}
		c.Limit, c.LimitSet = n, true
		return nil
	})
}

// waitValue is the value of -w: seconds as flock(1) takes them (fractions too), or a Go duration.
type waitValue time.Duration

// String is "" for the zero value (0, which flag's help takes for the default) and for waiting
// as long as it takes.
func (w *waitValue) String() string {
	if w == nil || time.Duration(*w) <= 0 {
		return ""
	}
	return time.Duration(*w).String()
}

// Set parses s with parseWait.
func (w *waitValue) Set(s string) error {
	d, err := parseWait(s)
	if err != nil {
		return err
	}
	*w = waitValue(d)
	return nil
}

// parseWait parses a wait: a number of seconds ("0.5", "60") or a Go duration ("1m30s"). A
// negative one waits as long as it takes (waitForever), as --wait did before flock's forms.
func parseWait(s string) (time.Duration, error) {
	var d time.Duration
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
			return 0, errors.New("want seconds (0.5, 60) or a duration (1m30s)")
		}
		d = time.Duration(secs * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, errors.New("want seconds (0.5, 60) or a duration (1m30s)")
	}
	if d < 0 {
		return waitForever, nil
	}
	return d, nil
}

// kindValue is the value of -s and -x (flock(1)'s): a boolean flag that sets *shared to
// shared, so that the last one given wins, as with flock, and *set to true.
type kindValue struct {
	shared *bool
	set    *bool
	value  bool
}

// IsBoolFlag makes -s and -x flags without a value.
func (v *kindValue) IsBoolFlag() bool { return true }

// String is "true" when the flag's kind is the one chosen, for flag's help.
func (v *kindValue) String() string {
	if v == nil || v.shared == nil {
		return "false"
	}
	return strconv.FormatBool(*v.shared == v.value)
}

// Set sets the kind when s is "true" (the flag alone), and the other kind for "false" (-s=false).
func (v *kindValue) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.shared, *v.set = v.value == on, true
	return nil
}

// shellValue is the value of -c.
type shellValue struct{ c *runConfig }

// String is the command line given to -c.
func (v *shellValue) String() string {
	if v == nil || v.c == nil {
		return ""
	}
	return v.c.Shell
}

// Set records the command line of -c.
func (v *shellValue) Set(s string) error {
	v.c.Shell, v.c.ShellSet = s, true
	return nil
}

// positional takes the key and the command from the positional arguments: "KEY command
// [args...]", "KEY -c 'command'", or with --key only the command. It returns the command line
// to run.
func (c *runConfig) positional(pos []string) ([]string, error) {
	if !c.KeySet {
		if len(pos) == 0 {
			return nil, usagef("no key given: locker run [flags] KEY command [args...]")
		}
		c.Key, pos = pos[0], pos[1:]
		if len(pos) > 0 && pos[0] == "--" {
			pos = pos[1:]
		}
		if len(pos) > 0 && (pos[0] == "-c" || pos[0] == "--command") {
			if len(pos) != 2 {
				return nil, usagef("%s takes exactly one command line: locker run KEY -c 'command'", pos[0])
			}
			if c.ShellSet {
				return nil, usagef("-c given twice")
			}
			c.Shell, c.ShellSet, pos = pos[1], true, nil
		}
	}
	switch {
	case c.ShellSet && len(pos) > 0:
		return nil, usagef("both -c and a command given: %s", display.Key(strings.Join(pos, " ")))
	case c.ShellSet:
		return shellCommand(c.Shell), nil
	case len(pos) == 0:
		return nil, usagef("no command given: locker run KEY command [args...], or KEY -c 'command'")
	}
	return pos, nil
}

// validate checks the flags' values.
func (c *runConfig) validate() error {
	if err := checkKey(c.Key); err != nil {
		return err
	}
	switch {
	case c.TTL < locker.MinTTL:
		return usagef("--ttl %v: must be at least %v", c.TTL, locker.MinTTL)
	case c.Grace < 0:
		return usagef("--grace %v: must not be negative", c.Grace)
	case c.ConflictCode < 0 || c.ConflictCode > 255:
		return usagef("-E %d: must be 0 to 255", c.ConflictCode)
	case c.LimitSet && c.Limit < 1:
		return usagef("--limit %d: a semaphore needs 1 permit or more", c.Limit)
	case c.LimitSet && c.KindSet:
		return usagef("--limit with -s or -x: a semaphore's permits are neither shared nor exclusive locks; give --limit alone")
	}
	if c.OwnerLabel != "" {
		if err := locker.CheckOwnerLabel(c.OwnerLabel); err != nil {
			return usagef("--owner-label: %s", errorText(err))
		}
	}
	if c.NonBlock {
		c.Wait = 0
	}
	return nil
}

// defaultLabel is the owner label of locker run: host/pid, cut to locker.MaxLabelLen.
func defaultLabel() string {
	host, err := os.Hostname()
	if err != nil || locker.CheckOwnerLabel(host) != nil {
		host = "unknown-host"
	}
	pid := "/" + strconv.Itoa(os.Getpid())
	if len(host)+len(pid) > locker.MaxLabelLen {
		host = host[:locker.MaxLabelLen-len(pid)]
	}
	return host + pid
}

// handledSignals are the forwardedSignals that locker run was not started with ignored. An
// ignored one stays ignored, by locker run, its supervisor and the command, which inherits it:
// under nohup, a hangup neither ends the wait nor reaches the command, as it would without locker
// run.
func handledSignals() []os.Signal {
	var out []os.Signal
	for _, sig := range forwardedSignals {
		if !signal.Ignored(sig) {
			out = append(out, sig)
		}
	}
	return out
}

// An interrupted is the cause of the end of the wait for the lock: signal sig arrived.
type interrupted struct{ sig os.Signal }

// Error is "interrupted by SIGINT".
func (e *interrupted) Error() string { return "interrupted by " + signalName(e.sig) }

// runLocked connects, holds the lock on cfg.Key while the command argv runs, and returns an
// *exitError with the exit status (nil for 0).
func runLocked(ctx context.Context, s *streams, cfg runConfig, cf *connFlags, argv []string) error {
	// The signals are ours from the start: while waiting, they end the wait (130 for Ctrl-C);
	// once the command runs, they are forwarded to it.
	sigs := make(chan os.Signal, 8)
	if handled := handledSignals(); len(handled) > 0 {
		signal.Notify(sigs, handled...)
		defer signal.Stop(sigs)
	}
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stopWatch := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case sig := <-sigs:
			cancel(&interrupted{sig})
		case <-stopWatch:
		}
	}()
	endWait := func() error {
		close(stopWatch)
		<-watching
		if in, ok := context.Cause(wctx).(*interrupted); ok {
			return &exitError{128 + signalNumber(in.sig), fmt.Errorf("%v while waiting for %s", in, what(cfg))}
		}
		return nil
	}

	backend, err := cf.connect(wctx)
	if err != nil {
		if ierr := endWait(); ierr != nil {
			return ierr
		}
		return err
	}
	defer backend.close()
	if err := kindsSupported(cfg, cf, backend.Locker); err != nil {
		if ierr := endWait(); ierr != nil {
			return ierr
		}
		return err
	}
	backend.warnDown(s, "run")
	servers := serverIDs(cf)
	inherited := inheritedHolds()
	outer := findHold(inherited, servers, cfg.Key)

	opts := []locker.Option{locker.WithTTL(cfg.TTL)}
	if cfg.Fencing {
		opts = append(opts, locker.WithFencing())
	}
	if cfg.Fair {
		opts = append(opts, locker.WithFair())
	}
	label := cfg.OwnerLabel
	if label == "" {
		label = defaultLabel()
	}
	opts = append(opts, locker.WithOwnerLabel(label))
	if cfg.Metrics {
		var m metrics
		opts = append(opts, locker.WithObserver(m.observer()))
		defer m.write(s.err, "run") // after Close, below: every event is in
	}
	client := locker.New(backend.Locker, opts...)
	defer client.Close()

	if cfg.Verbose && outer == nil {
		fmt.Fprintf(s.err, "locker run: getting %s\n", what(cfg))
	}
	start := time.Now()
	lease, err := acquire(wctx, client, cfg, outer)
	if ierr := endWait(); ierr != nil {
		if err == nil {
			_ = lease.Unlock()
		}
		return ierr
	}
	if err != nil {
		return err
	}
	if cfg.Verbose {
		fmt.Fprintf(s.err, "locker run: getting %s took %.6f seconds\n", what(cfg), time.Since(start).Seconds())
		switch {
		case outer != nil && cfg.Limit > 0:
			fmt.Fprintf(s.err, "locker run: re-entered the permit of an outer locker run (holds %d)\n", lease.Holds())
		case outer != nil:
			kind := ""
			if cfg.Shared {
				kind = " with a shared hold"
			}
			fmt.Fprintf(s.err, "locker run: re-entered the hold of an outer locker run%s (holds %d)\n", kind, lease.Holds())
		case cfg.Limit > 0:
			fmt.Fprintf(s.err, "locker run: %s\n", gotPermit(wctx, client, cfg, lease))
		}
		fmt.Fprintf(s.err, "locker run: executing %s\n", strings.Join(argv, " "))
	}

	// The command gets no Redis credentials: a nested locker run finds its servers in holdsEnv.
	// Under -o there is no hold to pass on, and the user's own settings stay as they are.
	env := os.Environ()
	if !cfg.Close {
		env = withoutEnv(env, redisEnv, passwordEnv)
	}
	if cfg.Fencing {
		env = setEnv(env, tokenEnv, strconv.FormatUint(lease.Token(), 10))
	}
	if !cfg.Close && outer == nil {
		holds := append(inherited, heldLock{Servers: servers, Key: cfg.Key, Owner: lease.Owner()})
		if b, err := json.Marshal(holds); err == nil {
			env = setEnv(env, holdsEnv, string(b))
		}
	}
	code, lost, err := runCommandLocked(s, cfg, lease, argv, env, sigs)
	if lost {
		// runCommandLocked said so when it happened. No Unlock: the hold is gone, or Redis is out
		// of reach and the lease runs out by itself.
		return &exitError{exitLockLost, nil}
	}
	switch uerr := lease.Unlock(); {
	case errors.Is(uerr, locker.ErrNotHeld):
		return &exitError{exitLockLost, fmt.Errorf("%s was lost while the command ran (expired or forced away), unnoticed until it exited (status %d)", what(cfg), code)}
	case uerr != nil:
		fmt.Fprintf(s.err, "locker run: %s (the lease expires after --ttl %v)\n", errorText(uerr), cfg.TTL)
	}
	if err != nil || code != 0 {
		return &exitError{code, err}
	}
	return nil
}

// kindsSupported checks that the backend has what -s, --fair and --limit need: a quorum (--redis
// given several times, or the servers of an outer run on one) has neither shared locks nor a wait
// queue nor semaphores, which is a usage error.
func kindsSupported(cfg runConfig, cf *connFlags, backend locker.Locker) error {
	if len(cf.urls) < 2 {
		return nil // a single server without them: the library says so (errors.ErrUnsupported)
	}
	if _, ok := backend.(locker.Semaphorer); cfg.Limit > 0 && !ok {
		return usagef("--limit: a quorum (%d servers) has no semaphores; use a single --redis server", len(cf.urls))
	}
	if !cfg.Shared && !cfg.Fair {
		return nil
	}
	if _, ok := backend.(locker.KindLocker); ok {
		return nil
	}
	var flags []string
	if cfg.Shared {
		flags = append(flags, "--shared")
	}
	if cfg.Fair {
		flags = append(flags, "--fair")
	}
	return usagef("%s: a quorum (%d servers) has no shared locks or wait queues; use a single --redis server", strings.Join(flags, " and "), len(cf.urls))
}

// acquire takes the lock (shared with -s, in the key's queue with --fair; with --limit, a permit
// of the semaphore), waiting as cfg.Wait says, or re-enters the outer hold (a nested -s inside an
// exclusive run adds a shared hold to it; a nested exclusive run inside a shared one is refused,
// as it would upgrade the hold; a nested --limit re-enters the outer run's permit). A refusal is
// an *exitError with cfg.ConflictCode, and a message only with -v, as flock(1) does, or with
// --limit (flock has no semaphores to be silent like); the refused upgrade, and a key held with
// another limit (ErrLimitMismatch), always say why.
func acquire(ctx context.Context, client *locker.Client, cfg runConfig, outer *heldLock) (*locker.Lease, error) {
	lock, try := client.Lock, client.TryLock
	switch n := cfg.Limit; {
	case n > 0:
		lock = func(ctx context.Context, key string, opts ...locker.Option) (*locker.Lease, error) {
			return client.Acquire(ctx, key, n, opts...)
		}
		try = func(ctx context.Context, key string, opts ...locker.Option) (*locker.Lease, error) {
			return client.TryAcquire(ctx, key, n, opts...)
		}
	case cfg.Shared:
		lock, try = client.RLock, client.TryRLock
	}
	var (
		lease *locker.Lease
		err   error
	)
	switch {
	case outer != nil:
		lease, err = try(ctx, cfg.Key, locker.WithHeldOwner(outer.Owner))
		if errors.Is(err, locker.ErrLockLost) {
			return nil, &exitError{exitLockLost, fmt.Errorf("the hold of the outer locker run on %s is gone (released, expired or forced away), and a nested run never takes a new lock", display.Key(cfg.Key))}
		}
		if errors.Is(err, locker.ErrUpgrade) {
			return nil, &exitError{cfg.ConflictCode, fmt.Errorf("lock %s not obtained: the outer locker run holds it shared (--shared), and an exclusive hold inside it would be an upgrade, which could wait for ever on another reader doing the same; give this run --shared too, or take the exclusive lock outside the shared run", display.Key(cfg.Key))}
		}
	case cfg.Wait == 0:
		lease, err = try(ctx, cfg.Key)
	case cfg.Wait > 0:
		tctx, cancel := context.WithTimeout(ctx, cfg.Wait)
		defer cancel()
		lease, err = lock(tctx, cfg.Key)
	default:
		lease, err = lock(ctx, cfg.Key)
	}
	if errors.Is(err, locker.ErrLimitMismatch) {
		return nil, &exitError{cfg.ConflictCode, limitMismatch(ctx, client, cfg, outer != nil)}
	}
	if nerr, ok := asError[*locker.NotObtainedError](err); ok && ctx.Err() == nil {
		var msg error
		if cfg.Verbose || cfg.Limit > 0 {
			within := ""
			if cfg.Wait > 0 {
				within = " within " + cfg.Wait.String()
			}
			msg = fmt.Errorf("%s not obtained%s: %s", what(cfg), within, refusal(cfg, nerr))
		}
		return nil, &exitError{cfg.ConflictCode, msg}
	}
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, locker.ErrInvalid):
		return nil, usagef("%s", errorText(err))
	case errors.Is(err, locker.ErrNotALock):
		return nil, &exitError{exitUnavailable, keyError(cfg.Key, err)}
	}
	return nil, &exitError{exitUnavailable, err}
}

// what names what a run of cfg takes, in messages: lock "KEY", or permit of semaphore "KEY"
// (--limit).
func what(cfg runConfig) string {
	if cfg.Limit > 0 {
		return "permit of semaphore " + display.Key(cfg.Key)
	}
	return "lock " + display.Key(cfg.Key)
}

// refusal says why a run of cfg was refused, as nerr reports it: for a lock (-v only) what may
// have been in the way, and the holder's lease; for a semaphore, how many of its permits were
// taken and when the soonest of their leases ends.
func refusal(cfg runConfig, nerr *locker.NotObtainedError) string {
	var why string
	switch {
	case cfg.Limit > 0 && nerr.Taken > 0 && nerr.Taken < cfg.Limit:
		why = fmt.Sprintf("%d of %d permits taken, and others queued for one first (--fair)", nerr.Taken, cfg.Limit)
	case cfg.Limit > 0 && nerr.Taken > 0:
		why = fmt.Sprintf("%d of %d permits taken", nerr.Taken, cfg.Limit)
	case cfg.Limit > 0:
		why = fmt.Sprintf("no permit of %d free", cfg.Limit)
	case cfg.Shared && cfg.Fair:
		why = "a writer holds it or is queued ahead"
	case cfg.Shared:
		why = "a writer holds it or waits for it"
	case cfg.Fair:
		why = "held by another owner, or others queued for it first"
	default:
		why = "held by another owner"
	}
	switch {
	case nerr.TTL <= 0:
	case cfg.Limit > 0:
		why += fmt.Sprintf(", the soonest of their leases ends in %v", nerr.TTL.Round(time.Millisecond))
	default:
		why += fmt.Sprintf(" (lease %v left)", nerr.TTL.Round(time.Millisecond))
	}
	return why
}

// limitMismatch is the message of a run refused with locker.ErrLimitMismatch: the key is held
// as another kind than cfg asks for (a lock, or a semaphore of another size), which an Inspect
// tells; when nested, by the outer run.
func limitMismatch(ctx context.Context, client *locker.Client, cfg runConfig, nested bool) error {
	held := "another kind (with another limit)"
	if st, err := client.Inspect(ctx, cfg.Key); err == nil && st.Locked {
		held = kindOf(st.Limit, st.Shared)
	}
	asked := kindOf(cfg.Limit, cfg.Shared)
	if nested {
		return fmt.Errorf("%s not obtained: the outer locker run holds it as %s, and this run asks for %s: a nested run re-enters the outer hold only with the same --limit (none for a lock)", what(cfg), held, asked)
	}
	return fmt.Errorf("%s not obtained: the key is held as %s, and this run asks for %s: the runs on a key must all give the same --limit (none for a lock), and one that does not is refused at once rather than wait", what(cfg), held, asked)
}

// kindOf names a kind of hold for people: a semaphore of limit permits, a shared lock or a lock.
func kindOf(limit int, shared bool) string {
	switch {
	case limit > 0:
		return fmt.Sprintf("a semaphore of %d (--limit %d)", limit, limit)
	case shared:
		return "a shared lock (-s)"
	}
	return "a lock (no --limit)"
}

// gotPermit says, for -v, which permit lease is: its owner as locker inspect shows it (never the
// whole token), its fencing token with --fencing, and how many of the semaphore's permits are
// taken now (one Inspect; left out when it fails).
func gotPermit(ctx context.Context, client *locker.Client, cfg runConfig, lease *locker.Lease) string {
	msg := fmt.Sprintf("got a permit of semaphore %s as %s", display.Key(cfg.Key), display.Owner(lease.Owner()))
	if cfg.Fencing {
		msg += fmt.Sprintf(", fencing token %d", lease.Token())
	}
	if st, err := client.Inspect(ctx, cfg.Key); err == nil && st.Limit > 0 {
		msg += fmt.Sprintf("; %d of %d permits taken", len(st.Holders), st.Limit)
	}
	return msg
}

// holdsEnv is the environment variable through which locker run passes its holds to the
// command, so that a nested locker run on the same key and servers re-enters the hold: a JSON
// list of heldLock. It holds owner tokens (secrets: whoever has one can release that lock), and
// never a password.
const holdsEnv = "LOCKER_HOLDS"

// A heldLock is one hold of an outer locker run, as passed in holdsEnv.
type heldLock struct {
	Servers []string `json:"servers"` // serverIDs of the outer run
	Key     string   `json:"key"`
	Owner   string   `json:"owner"` // the owner token, for locker.WithHeldOwner
}

// inheritedHolds returns the holds passed by outer locker runs; none when holdsEnv is unset or
// not valid.
func inheritedHolds() []heldLock {
	var holds []heldLock
	if raw := os.Getenv(holdsEnv); raw != "" {
		if json.Unmarshal([]byte(raw), &holds) != nil {
			return nil
		}
	}
	return holds
}

// findHold returns the hold of holds on key at servers, or nil.
func findHold(holds []heldLock, servers []string, key string) *heldLock {
	for i, h := range holds {
		if h.Key == key && h.Owner != "" && slices.Equal(h.Servers, servers) {
			return &holds[i]
		}
	}
	return nil
}

// serverIDs identifies the servers of cf, whatever the driver: each URL without credentials or
// options, its host and port as serverID gives them and its database explicit
// ("redis://127.0.0.1:6379/0"), sorted.
func serverIDs(cf *connFlags) []string {
	if cf.postgres != "" {
		return []string{postgresID(cf.postgres)}
	}
	if len(cf.urls) == 1 && isPostgresURL(cf.urls[0]) {
		return []string{postgresID(cf.urls[0])}
	}
	raws := []string(cf.urls)
	if len(raws) == 0 {
		raws = []string{os.Getenv(redisEnv)}
	}
	ids := make([]string, 0, len(raws))
	for _, raw := range raws {
		u, err := url.Parse(raw)
		if err != nil {
			continue // connect refused it already
		}
		db := strings.Trim(u.Path, "/")
		if db == "" {
			db = "0"
		}
		if n, err := strconv.Atoi(db); err == nil {
			db = strconv.Itoa(n)
		}
		ids = append(ids, strings.ToLower(u.Scheme)+"://"+serverID(u)+"/"+db)
	}
	slices.Sort(ids)
	return ids
}

// withoutEnv returns env without the variables names (in any case on Windows, where names are
// not case-sensitive).
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(names, func(n string) bool {
			return name == n || runtime.GOOS == "windows" && strings.EqualFold(name, n)
		})
	})
}

// setEnv returns env with name set to value (replacing an earlier setting).
func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(env, name+"="+value)
}

// runCommandLocked runs argv with env while lease is held: it forwards sigs to the command
// (but not those that it had from the terminal too, see fromTerminal) and ends the command's
// tree when the lease ends. It returns the command's exit status, whether the lease was lost,
// and an error when the command could not be run.
func runCommandLocked(s *streams, cfg runConfig, lease *locker.Lease, argv, env []string, sigs <-chan os.Signal) (code int, lost bool, err error) {
	if lease.Context().Err() != nil {
		fmt.Fprintf(s.err, "locker run: %s lost before the command started\n", what(cfg))
		return 0, true, nil
	}
	cmd, err := startCommand(s, cfg, argv, env)
	if err != nil {
		return startFailure(err), false, err
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := cmd.Wait()
		done <- result{code, err}
	}()
	ended := lease.Context().Done()
	for {
		select {
		case sig := <-sigs:
			// Ctrl-C at the terminal reached the command (in locker run's process group) as it
			// reached locker run: a second SIGINT would tell many programs to quit at once.
			if !fromTerminal(sig) {
				cmd.Signal(sig)
			}
		case <-ended:
			ended, lost = nil, true
			fmt.Fprintf(s.err, "locker run: %s lost; terminating the command (SIGTERM, then SIGKILL after %v)\n", what(cfg), cfg.Grace)
			cmd.Terminate(cfg.Grace)
		case r := <-done:
			return r.code, lost, r.err
		}
	}
}

// A runningCommand is the command that locker run started, directly or through the supervisor.
type runningCommand interface {
	// Signal forwards sig to the command.
	Signal(sig os.Signal)
	// Terminate ends the command and its descendants: SIGTERM, then SIGKILL after grace.
	Terminate(grace time.Duration)
	// Wait waits until the command (and, with the supervisor, its descendants) has exited, and
	// returns its exit status as a shell reports it, and an error to print, if any.
	Wait() (int, error)
}
