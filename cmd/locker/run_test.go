//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// helperArg, as the first argument of the test binary, makes it a helper process instead of a
// test run: the child of locker run, or locker itself (see helper).
const helperArg = "locker-test-helper"

// TestMain runs the helper processes (see helper), or the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		os.Exit(helper(os.Args[2:]))
	}
	// A binary built with -race sleeps a second at a successful exit unless told otherwise; the
	// helpers are such binaries.
	if gorace := os.Getenv("GORACE"); !strings.Contains(gorace, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(gorace+" atexit_sleep_ms=0"))
	}
	os.Exit(m.Run())
}

// helper is a process for the run tests, the test binary run with helperArg and one of:
//
//	exit N        exits with status N
//	signals       prints "ready PID", then at SIGINT, SIGTERM, SIGHUP or SIGQUIT prints
//	              "got SIGNAL" and dies of that signal
//	ignore-term   ignores SIGTERM, prints "ready PID" and sleeps until killed
//	count-int     prints "ready PID", then "int N" at the Nth SIGINT and "hup N" at the Nth
//	              SIGHUP; at SIGTERM prints "ints N" and exits 3 (after a minute without, 99)
//	env NAME      prints the value of the environment variable NAME
//	holds URL KEY prints "holds N" (0 when KEY is free) as the server at URL sees it
//	permits URL KEY
//	              prints "taken K holds N": the holders of KEY and all their holds
//	slot DIR      a command of a run with --limit (see slot)
//	locker ARGS   is the locker command, with this process's stdio and signals
func helper(args []string) int {
	switch {
	case len(args) == 3 && (args[0] == "holds" || args[0] == "permits"):
		cn, err := (&connFlags{urls: urlList{args[1]}, driver: "goredis"}).connect(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 97
		}
		defer cn.close()
		st, err := locker.New(cn.Locker).Inspect(context.Background(), args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 97
		}
		if args[0] == "permits" {
			fmt.Printf("taken %d ", len(st.Holders))
		}
		fmt.Printf("holds %d\n", st.Holds)
		return 0
	case len(args) == 2 && args[0] == "slot":
		return slot(args[1])
	case len(args) == 2 && args[0] == "exit":
		n, _ := strconv.Atoi(args[1])
		return n
	case len(args) == 1 && args[0] == "signals":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		fmt.Printf("ready %d\n", os.Getpid())
		sig := <-sigs
		fmt.Printf("got %v\n", sig)
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		time.Sleep(time.Minute) // the signal ends the process first
		return 99
	case len(args) == 1 && args[0] == "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Printf("ready %d\n", os.Getpid())
		time.Sleep(time.Minute) // until SIGKILL
		return 99
	case len(args) == 1 && args[0] == "count-int":
		sigs := make(chan os.Signal, 8)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM)
		fmt.Printf("ready %d\n", os.Getpid())
		timeout := time.After(time.Minute)
		ints, hups := 0, 0
		for {
			select {
			case sig := <-sigs:
				switch sig {
				case syscall.SIGINT:
					ints++
					fmt.Printf("int %d\n", ints)
				case syscall.SIGHUP:
					hups++
					fmt.Printf("hup %d\n", hups)
				default:
					fmt.Printf("ints %d\n", ints)
					return 3
				}
			case <-timeout:
				return 99
			}
		}
	case len(args) == 2 && args[0] == "env":
		fmt.Println(os.Getenv(args[1]))
		return 0
	case len(args) > 0 && args[0] == "locker":
		return run(args[1:], &streams{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	}
	fmt.Fprintf(os.Stderr, "helper: bad arguments %q\n", args)
	return 98
}

// waitFor waits until the output contains s; it fails the test after 10 seconds.
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		found, changed := strings.Contains(o.buf.String(), s), o.changed
		o.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("output lacks %q after 10s:\n%s", s, o)
		}
	}
}

// child is the command line of a helper process.
func child(args ...string) []string { return append([]string{os.Args[0], helperArg}, args...) }

// runArgs is "run" with the flags, then "--" and the command line.
func runArgs(url, key string, flags []string, argv []string) []string {
	args := append([]string{"run", "--redis", url, "--key", key}, flags...)
	return append(append(args, "--"), argv...)
}

// readyPID waits for the helper's "ready PID" line on out and returns the PID.
func readyPID(t *testing.T, out *output) int {
	t.Helper()
	out.waitFor(t, "\n")
	line, _, _ := strings.Cut(out.String(), "\n")
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "ready "))
	if err != nil {
		t.Fatalf("helper's first line %q is not \"ready PID\"", line)
	}
	return pid
}

// goRun runs locker with args in a goroutine and returns its exit code's channel.
func goRun(tio testIO, args []string) <-chan int {
	code := make(chan int, 1)
	go func() { code <- run(args, tio.streams) }()
	return code
}

// exitCode waits for code; it fails the test after 20 seconds.
func exitCode(t *testing.T, code <-chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("locker run did not exit within 20s")
		return 0
	}
}

// locker run exits with the command's status, and frees the key.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	for _, status := range []int{0, 3} {
		tio := newIO("", false)
		tio.exec(t, status, runArgs(url, "job", nil, child("exit", strconv.Itoa(status)))...)
		if tio.stderr.String() != "" {
			t.Errorf("exit %d: stderr:\n%s", status, tio.stderr)
		}
		if st, err := lib.Inspect(context.Background(), "job"); err != nil || st.Locked {
			t.Errorf("exit %d: after run the key is %+v, %v; want free", status, st, err)
		}
	}
}

// With --fencing, each run's command gets a larger token than the previous run's.
func TestRunFencingToken(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	var last uint64
	for i := range 3 {
		tio := newIO("", false)
		tio.exec(t, 0, runArgs(url, "job", []string{"--fencing"}, child("env", tokenEnv))...)
		token, err := strconv.ParseUint(strings.TrimSpace(tio.stdout.String()), 10, 64)
		if err != nil || token <= last {
			t.Fatalf("run %d: %s = %q (%v), want a number above %d", i, tokenEnv, tio.stdout, err, last)
		}
		last = token
	}
	tio := newIO("", false)
	tio.exec(t, 0, runArgs(url, "job", nil, child("env", tokenEnv))...)
	if got := strings.TrimSpace(tio.stdout.String()); got != "" {
		t.Fatalf("without --fencing, %s = %q, want it unset", tokenEnv, got)
	}
}

// The lock is held, and renewed, while the command runs, and released after.
func TestRunHoldsTheLock(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	tio := newIO("", false)
	code := goRun(tio, runArgs(url, "job", []string{"--ttl=300ms"}, child("signals")))
	pid := readyPID(t, tio.stdout)
	ctx := context.Background()
	st, err := lib.Inspect(ctx, "job")
	if err != nil || !st.Locked || st.Holds != 1 {
		t.Errorf("while the command runs, the key is %+v, %v; want locked, 1 hold", st, err)
	}
	if _, err := lib.TryLock(ctx, "job"); err == nil {
		t.Error("TryLock of another owner succeeded while the command runs")
	}
	// Outlast the TTL by far: the watchdog keeps the lock.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if st, err := lib.Inspect(ctx, "job"); err != nil || !st.Locked {
			t.Fatalf("the lock went while the command ran: %+v, %v", st, err)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, not a synchronisation
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d (the child died of SIGTERM)\nstderr:\n%s", c, 128+int(syscall.SIGTERM), tio.stderr)
	}
	if st, err := lib.Inspect(ctx, "job"); err != nil || st.Locked {
		t.Errorf("after run the key is %+v, %v; want free", st, err)
	}
}

// A held key: -n and -w give up with the conflict code (1, or -E), silently as flock(1) does
// unless -v.
func TestRunNotObtained(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	lease := lockKey(t, lib, "job")
	defer lease.Unlock()
	for _, tc := range []struct {
		flags  []string
		code   int
		min    time.Duration // the least time before giving up
		stderr string        // "" for none
	}{
		{flags: []string{"-n"}, code: 1},
		{flags: []string{"--nb", "-E", "3"}, code: 3},
		{flags: []string{"-w", "0"}, code: 1},
		{flags: []string{"-w", "0.5"}, code: 1, min: 500 * time.Millisecond},
		{flags: []string{"--wait=300ms", "-E", "75"}, code: 75, min: 300 * time.Millisecond},
		{flags: []string{"-n", "-v"}, code: 1, stderr: `locker run: lock "job" not obtained: held by another owner (lease `},
		{flags: []string{"-v", "-w", "0.2"}, code: 1, min: 200 * time.Millisecond, stderr: `locker run: lock "job" not obtained within 200ms: held by another owner`},
	} {
		tio := newIO("", false)
		start := time.Now()
		tio.exec(t, tc.code, append(append([]string{"run", "--redis", url}, tc.flags...), append([]string{"job"}, child("signals")...)...)...)
		d := time.Since(start)
		switch {
		case tc.stderr == "" && tio.stderr.String() != "":
			t.Errorf("%q: stderr (want none, as flock):\n%s", tc.flags, tio.stderr)
		case !strings.Contains(tio.stderr.String(), tc.stderr):
			t.Errorf("%q: stderr lacks %q:\n%s", tc.flags, tc.stderr, tio.stderr)
		}
		if tio.stdout.String() != "" {
			t.Errorf("%q: the command ran: %s", tc.flags, tio.stdout)
		}
		if d < tc.min {
			t.Errorf("%q: gave up after %v, want at least %v", tc.flags, d, tc.min)
		}
		t.Logf("%q: exit %d after %v", tc.flags, tc.code, d)
	}
}

// A command that does not exist: 127, and the key is free.
func TestRunCommandNotFound(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	tio := newIO("", false)
	tio.exec(t, exitNotFound, runArgs(url, "job", nil, []string{"/nonexistent/command"})...)
	tio = newIO("", false)
	tio.exec(t, exitNotFound, runArgs(url, "job", nil, []string{"no-such-command-for-locker-tests"})...)
	if !strings.Contains(tio.stderr.String(), "executable file not found") {
		t.Errorf("stderr:\n%s", tio.stderr)
	}
	if st, err := lib.Inspect(context.Background(), "job"); err != nil || st.Locked {
		t.Errorf("after run the key is %+v, %v; want free", st, err)
	}
}

// The lock is forced away while the command runs: locker run terminates it with SIGTERM and
// exits with exitLockLost.
func TestRunLockLost(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	tio := newIO("", false)
	code := goRun(tio, runArgs(url, "job", []string{"--ttl=300ms", "--grace=10s"}, child("signals")))
	readyPID(t, tio.stdout)
	if removed, err := lib.ForceUnlock(context.Background(), "job"); err != nil || !removed {
		t.Fatalf("ForceUnlock = %v, %v", removed, err)
	}
	if c := exitCode(t, code); c != exitLockLost {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", c, exitLockLost, tio.stdout, tio.stderr)
	}
	if want := `locker run: lock "job" lost; terminating the command`; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
	}
	if want := "got terminated"; !strings.Contains(tio.stdout.String(), want) {
		t.Errorf("the command did not get SIGTERM: stdout:\n%s", tio.stdout)
	}
	if strings.Contains(tio.stderr.String(), "SIGKILL;") {
		t.Errorf("the command was killed although it exited at SIGTERM:\n%s", tio.stderr)
	}
}

// The lock is forced away and the command exits before the watchdog's next renewal: the unlock
// finds the lock gone, and locker run exits with exitLockLost all the same.
func TestRunLockLostUnnoticed(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	tio := newIO("", false)
	code := goRun(tio, runArgs(url, "job", []string{"--ttl=1m"}, child("signals")))
	pid := readyPID(t, tio.stdout)
	if _, err := lib.ForceUnlock(context.Background(), "job"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != exitLockLost {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", c, exitLockLost, tio.stderr)
	}
	if want := `lock "job" was lost while the command ran (expired or forced away), unnoticed until it exited (status 143)`; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
	}
}

// The server goes away while the command runs: the lease ends when it may have expired, and the
// command is terminated.
func TestRunServerGone(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	tio := newIO("", false)
	start := time.Now()
	code := goRun(tio, runArgs("redis://"+srv.Addr, "job", []string{"--ttl=500ms"}, child("signals")))
	readyPID(t, tio.stdout)
	srv.Stop()
	if c := exitCode(t, code); c != exitLockLost {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", c, exitLockLost, tio.stderr)
	}
	if want := `locker run: lock "job" lost; terminating the command`; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the lease ended after %v, before it could have expired", d)
	}
}

// A command that ignores SIGTERM is killed after --grace.
func TestRunLockLostKill(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	tio := newIO("", false)
	code := goRun(tio, runArgs(url, "job", []string{"--ttl=300ms", "--grace=200ms"}, child("ignore-term")))
	pid := readyPID(t, tio.stdout)
	if _, err := lib.ForceUnlock(context.Background(), "job"); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != exitLockLost {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", c, exitLockLost, tio.stderr)
	}
	for _, want := range []string{
		`locker run: lock "job" lost; terminating the command`,
		"locker run: the command did not exit within 200ms of SIGTERM; sending SIGKILL",
	} {
		if !strings.Contains(tio.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
		}
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the command (pid %d) is still there: kill -0: %v", pid, err)
	}
}

// Signals sent to locker run reach the command: locker run runs as a process of its own here,
// so that the signals are real.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd, stdout, stderr, exited := lockerProcess(t, nil, runArgs(url, "job:"+strconv.Itoa(int(sig)), nil, child("signals"))...)
			pid := readyPID(t, stdout)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd, exited)
			stdout.waitFor(t, "got "+sig.String())
			switch {
			case sig == syscall.SIGQUIT && code != 0:
				// The Go runtime of the helper exits with 2 (or aborts) at SIGQUIT.
				t.Logf("exit code %d", code)
			case code != 128+int(sig):
				t.Errorf("exit code %d, want %d\nstderr:\n%s", code, 128+int(sig), stderr)
			}
		})
	}
}

// --redis repeated makes a quorum: run holds the lock on a majority of the servers while the
// command runs (so another owner on the same quorum is refused), and frees it after; twice is a
// usage error.
func TestRunQuorum(t *testing.T) {
	t.Parallel()
	var args []string
	var urls []string
	for range 3 {
		u := startMiniredis(t)
		urls = append(urls, u)
		args = append(args, "--redis", u)
	}
	tio := newIO("", false)
	code := goRun(tio, append(append([]string{"run"}, args...), append([]string{"--key", "job", "--fencing", "--"}, child("signals")...)...))
	pid := readyPID(t, tio.stdout)
	held := 0
	for _, u := range urls {
		if st, err := libClient(t, u).Inspect(context.Background(), "job"); err == nil && st.Locked {
			held++
		}
	}
	if held < 2 {
		t.Errorf("while the command runs, %d of 3 servers hold the key, want a majority", held)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", c, 128+int(syscall.SIGTERM), tio.stderr)
	}
	for i, u := range urls {
		if st, err := libClient(t, u).Inspect(context.Background(), "job"); err != nil || st.Locked {
			t.Errorf("server %d after run: %+v, %v; want free", i, st, err)
		}
	}
	two := newIO("", false)
	two.exec(t, 2, append(append([]string{"run"}, args[:4]...), "--key", "job", "--", "true")...)
	if !strings.Contains(two.stderr.String(), "a quorum needs 3 or more") {
		t.Errorf("--redis twice: stderr %q, want the quorum's usage error", two.stderr)
	}
}
