//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockerProcess starts locker with args as a process of its own (the test binary as helper), so
// that the signals it gets are real, with env added to its environment. It returns the process,
// its outputs, and a channel closed when it has exited.
func lockerProcess(t *testing.T, env []string, args ...string) (*exec.Cmd, *output, *output, <-chan struct{}) {
	t.Helper()
	stdout, stderr := newOutput(), newOutput()
	cmd := exec.Command(os.Args[0], append([]string{helperArg, "locker"}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second // should anything outlive locker run, holding stdout
	// No controlling terminal: were it in the foreground of the one that go test runs at,
	// locker run would take SIGINT and SIGQUIT for the terminal's and not forward them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // a no-op once it has exited
		<-exited
	})
	return cmd, stdout, stderr, exited
}

// waitExit waits for a process of lockerProcess to exit and returns its exit code; it fails the
// test after 20 seconds.
func waitExit(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}) int {
	t.Helper()
	code := make(chan int, 1)
	go func() {
		<-exited // closed at the latest by the cleanup that kills the process
		code <- cmd.ProcessState.ExitCode()
	}()
	return exitCode(t, code)
}

// -c runs the command line through /bin/sh, with the shell's exit status.
func TestRunShell(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	tio := newIO("", false)
	tio.exec(t, 4, "run", "--redis", url, "job", "-c", "echo $((1+2)); exit 4")
	if got := tio.stdout.String(); got != "3\n" {
		t.Errorf("stdout %q, want \"3\\n\"", got)
	}
	tio = newIO("", false)
	tio.exec(t, 0, "run", "--redis", url, "-c", "echo ok", "job")
	if got := tio.stdout.String(); got != "ok\n" {
		t.Errorf("-c before the key: stdout %q, want \"ok\\n\"", got)
	}
}

// Without -n or -w, locker run waits for the lock as long as it takes, and runs the command when
// the holder releases it.
func TestRunWaitsUntilReleased(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	lease := lockKey(t, lib, "job")
	tio := newIO("", false)
	code := goRun(tio, []string{"run", "--redis", url, "job", "-c", "echo ran"})
	select {
	case c := <-code:
		t.Fatalf("locker run exited (%d) while the lock was held\nstderr:\n%s", c, tio.stderr)
	case <-time.After(500 * time.Millisecond): // it is waiting: an observation, not a synchronisation
	}
	if tio.stdout.String() != "" {
		t.Fatalf("the command ran while the lock was held: %s", tio.stdout)
	}
	if err := lease.Unlock(); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != 0 || tio.stdout.String() != "ran\n" {
		t.Errorf("after the release: exit %d, stdout %q\nstderr:\n%s", c, tio.stdout, tio.stderr)
	}
}

// A locker run on the same key and server inside the command re-enters the outer hold at once
// (-n would fail otherwise), and its exit leaves the outer hold held. With -o the command does
// not inherit the hold.
func TestRunNested(t *testing.T) {
	t.Parallel()
	onEachServer(t, runNested)
}

// runNested is TestRunNested on the server at url.
func runNested(t *testing.T, url string) {
	bin := os.Args[0]
	inner := bin + " " + helperArg + " locker run -n --redis " + url + " job -- " + bin + " " + helperArg + " holds " + url + " job"
	script := inner + "; echo inner $?; " + bin + " " + helperArg + " holds " + url + " job"
	tio := newIO("", false)
	tio.exec(t, 0, "run", "--redis", url, "job", "-c", script)
	if want := "holds 2\ninner 0\nholds 1\n"; tio.stdout.String() != want {
		t.Errorf("stdout %q, want %q (the nested run re-enters; its exit keeps the outer hold)\nstderr:\n%s", tio.stdout, want, tio.stderr)
	}
	if st, err := libClient(t, url).Inspect(context.Background(), "job"); err != nil || st.Locked {
		t.Errorf("after the outer run the key is %+v, %v; want free", st, err)
	}

	tio = newIO("", false)
	tio.exec(t, 0, "run", "-o", "--redis", url, "job", "-c", inner+"; echo inner $?")
	if want := "inner 1\n"; tio.stdout.String() != want {
		t.Errorf("-o: stdout %q, want %q (the nested run does not get the hold)\nstderr:\n%s", tio.stdout, want, tio.stderr)
	}
}

// A nested run whose outer hold is gone fails with exitLockLost, and never takes a fresh lock.
func TestRunNestedHoldGone(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	holds := `[{"servers":["` + strings.Replace(url, "redis://", "redis://", 1) + `/0"],"key":"job","owner":"gone#0123456789abcdef0123456789abcdef"}]`
	cmd, stdout, stderr, exited := lockerProcess(t, []string{holdsEnv + "=" + holds}, "run", "--redis", url, "job", "-c", "echo ran")
	if c := waitExit(t, cmd, exited); c != exitLockLost {
		t.Errorf("exit %d, want %d\nstderr:\n%s", c, exitLockLost, stderr)
	}
	if want := `locker run: the hold of the outer locker run on "job" is gone`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if stdout.String() != "" {
		t.Errorf("the command ran: %s", stdout)
	}
	if st, err := libClient(t, url).Inspect(context.Background(), "job"); err != nil || st.Locked {
		t.Errorf("the key is %+v, %v; want free", st, err)
	}
}

// A signal while waiting for the lock ends locker run with 128+N (Ctrl-C: 130) and one line.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lease, err := libClient(t, url).Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Unlock() }) // after the parallel subtests, unlike a defer
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}, {syscall.SIGHUP, "SIGHUP", 129}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd, stdout, stderr, exited := lockerProcess(t, nil, "run", "-v", "--redis", url, "job", "-c", "echo ran")
			stderr.waitFor(t, `locker run: getting lock "job"`)
			start := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if c := waitExit(t, cmd, exited); c != tc.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", c, tc.code, stderr)
			}
			t.Logf("%s: exited %v after the signal", tc.name, time.Since(start))
			want := `locker run: interrupted by ` + tc.name + ` while waiting for lock "job"` + "\n"
			if got := stderr.String(); !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 2 {
				t.Errorf("stderr %q, want the -v line and %q", got, want)
			}
			if stdout.String() != "" {
				t.Errorf("the command ran: %s", stdout)
			}
		})
	}
}

// A key that holds another type is reported in one line, left as it is, and the command does not
// run.
func TestRunNotALock(t *testing.T) {
	t.Parallel()
	onEachServer(t, runNotALock)
}

// runNotALock is TestRunNotALock on the server at url.
func runNotALock(t *testing.T, url string) {
	rdb := redisClient(t, url)
	ctx := context.Background()
	if err := rdb.RPush(ctx, "job", "x").Err(); err != nil {
		t.Fatal(err)
	}
	tio := newIO("", false)
	tio.exec(t, exitUnavailable, "run", "--redis", url, "job", "-c", "echo ran")
	if want := "locker run: key job is not a lock (it holds another type of value, or a hash that locker did not write), so locker leaves it alone\n"; tio.stderr.String() != want {
		t.Errorf("stderr %q, want %q", tio.stderr, want)
	}
	if tio.stdout.String() != "" {
		t.Errorf("the command ran: %s", tio.stdout)
	}
	if n, err := rdb.LLen(ctx, "job").Result(); err != nil || n != 1 {
		t.Errorf("the list has %d elements (%v), want 1", n, err)
	}
}

// locker run labels its owner host/pid, or with --owner-label, so that inspect shows who holds
// the lock.
func TestRunOwnerLabel(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	host, _ := os.Hostname()
	for _, tc := range []struct {
		flags []string
		label string
	}{
		{nil, host + "/" + strconv.Itoa(os.Getpid())},
		{[]string{"--owner-label", "nightly report"}, "nightly report"},
	} {
		tio := newIO("", false)
		code := goRun(tio, append(append([]string{"run", "--redis", url}, tc.flags...), append([]string{"job"}, child("signals")...)...))
		pid := readyPID(t, tio.stdout)
		st, err := lib.Inspect(context.Background(), "job")
		if err != nil || !strings.HasPrefix(st.Owner, tc.label+"#") {
			t.Errorf("%q: owner %q (%v), want the label %q", tc.flags, st.Owner, err, tc.label)
		}
		syscall.Kill(pid, syscall.SIGTERM)
		if c := exitCode(t, code); c != 128+int(syscall.SIGTERM) {
			t.Errorf("%q: exit %d\nstderr:\n%s", tc.flags, c, tio.stderr)
		}
	}
}
