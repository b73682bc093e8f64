package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker/internal/testkit/redistest"
)

// procGone reports whether the process pid has exited: it is not in /proc, or is a zombie that
// nobody reaped yet.
func procGone(pid int) bool {
	_, zombie, ok := procParent(pid)
	return !ok || zombie
}

// alive returns the processes of pids that have not exited.
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if !procGone(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// killAll sends SIGKILL to pids, to clean up after a failed test.
func killAll(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// pidsLine waits for the line "pids P1 P2..." on out and returns the numbers.
func pidsLine(t *testing.T, out *output) []int {
	t.Helper()
	out.waitFor(t, "\n")
	line, _, _ := strings.Cut(out.String(), "\n")
	fields := strings.Fields(strings.TrimPrefix(line, "pids "))
	var pids []int
	for _, f := range fields {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("line %q is not \"pids P1 P2...\"", line)
		}
		pids = append(pids, pid)
	}
	return pids
}

// treeScript starts a background sleep and replaces the shell by another: a command with a
// grandchild, and the pids of both sleeps on the first line.
const treeScript = `sleep 300 & echo "pids $$ $!"; exec sleep 300`

// TestRunKilledEndsTree is the point of the supervisor: locker run is killed with SIGKILL while
// its command runs a process tree; the whole tree is gone before the lease can expire (2/3 of the
// TTL after the last renewal, at worst), and a second locker run on the key gets the lock only
// after that. A real redis-server, since the lease expiry is Redis's. In the second case the
// tree ignores SIGTERM, and the supervisor's SIGKILL after --ttl/3 ends it.
func TestRunKilledEndsTree(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	url := "redis://" + srv.Addr
	for _, tc := range []struct{ name, script string }{
		{"ExitsAtSIGTERM", treeScript},
		{"IgnoresSIGTERM", `trap "" TERM; ` + treeScript},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			killedRunEndsTree(t, url, tc.name, tc.script)
		})
	}
}

// killedRunEndsTree is a case of TestRunKilledEndsTree, on the key.
func killedRunEndsTree(t *testing.T, url, key, script string) {
	// A lease of 6s: the SIGKILL after ttl/3 (2s) comes 2s before the lease can expire, a wide margin
	// on a loaded machine.
	const ttl = 6 * time.Second
	first, stdout, stderr, exited := lockerProcess(t, nil, "run", "--redis", url, "--ttl", ttl.String(), key, "-c", script)
	pids := pidsLine(t, stdout)
	tree := descendantsOf(first.Process.Pid) // the supervisor, the command, its background sleep
	t.Cleanup(func() { killAll(tree) })
	for _, pid := range pids {
		if !slices.Contains(tree, pid) {
			t.Fatalf("pid %d of the command is not under locker run (%d): tree %v", pid, first.Process.Pid, tree)
		}
	}
	if len(tree) < 3 {
		t.Fatalf("tree under locker run: %v, want the supervisor and two sleeps", tree)
	}

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	second := newIO("", false)
	code := goRun(second, []string{"run", "--redis", url, key, "--", os.Args[0], helperArg, "signals"})

	var gone, locked time.Duration
	deadline := time.NewTimer(2 * ttl)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // a poll interval, not a synchronisation
	defer tick.Stop()
	for gone == 0 || locked == 0 {
		left := alive(tree)
		if gone == 0 && len(left) == 0 {
			gone = time.Since(killed)
		}
		if locked == 0 && strings.Contains(second.stdout.String(), "ready") {
			locked = time.Since(killed)
			if len(left) > 0 {
				t.Fatalf("the second locker run got the lock %v after the kill while %v of the first's tree still ran", locked, left)
			}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("after %v: still running %v of the tree %v; second run has the lock: %v\nfirst's stderr:\n%s\nsecond's stderr:\n%s",
				2*ttl, left, tree, locked > 0, stderr, second.stderr)
		}
	}
	t.Logf("%s: kill -9 of locker run (ttl %v): command tree of %d processes gone after %v; second locker run got the lock after %v", key, ttl, len(tree), gone, locked)
	if gone >= ttl*2/3 {
		t.Errorf("the tree was gone %v after the kill, not before the lease could expire (%v)", gone, ttl*2/3)
	}
	if want := "locker run: locker run died; ending the command and its processes"; !strings.Contains(stderr.String(), want) {
		t.Errorf("first's stderr lacks %q:\n%s", want, stderr)
	}
	<-exited
	pid := readyPID(t, second.stdout)
	syscall.Kill(pid, syscall.SIGTERM)
	if c := exitCode(t, code); c != 128+int(syscall.SIGTERM) {
		t.Errorf("second run: exit %d\nstderr:\n%s", c, second.stderr)
	}
}

// The supervisor is killed: the command dies with it (its parent-death signal), and locker run
// reports it and releases the lock.
func TestRunSupervisorKilled(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	tio := newIO("", false)
	code := goRun(tio, runArgs(url, "job", nil, child("signals")))
	pid := readyPID(t, tio.stdout)
	sup, _, ok := procParent(pid)
	if !ok {
		t.Fatalf("no parent for the command %d", pid)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want %d\nstderr:\n%s", c, 128+int(syscall.SIGKILL), tio.stderr)
	}
	if want := "the supervisor of the command died of killed"; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !procGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command %d still runs 10s after its supervisor was killed", pid)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
	if st, err := libClient(t, url).Inspect(context.Background(), "job"); err != nil || st.Locked {
		t.Errorf("the key is %+v, %v; want free", st, err)
	}
}

// What the command leaves running in the background when it exits is ended before the lock is
// released; and when the lock is lost, the whole tree is ended, not only the command.
func TestRunEndsLeftovers(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	tio := newIO("", false)
	tio.exec(t, 0, "run", "--redis", url, "--grace=5s", "job", "-c", `sleep 300 & echo "pids $!"`)
	pids := pidsLine(t, tio.stdout)
	t.Cleanup(func() { killAll(pids) })
	if left := alive(pids); len(left) > 0 {
		t.Errorf("after locker run returned, %v still run", left)
	}
	if want := "locker run: the command exited, leaving 1 process; ending them before the lock is released"; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tio.stderr)
	}

	tio = newIO("", false)
	code := goRun(tio, []string{"run", "--redis", url, "--ttl=300ms", "job", "-c", treeScript})
	pids = pidsLine(t, tio.stdout)
	t.Cleanup(func() { killAll(pids) })
	if _, err := libClient(t, url).ForceUnlock(context.Background(), "job"); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != exitLockLost {
		t.Errorf("exit %d, want %d\nstderr:\n%s", c, exitLockLost, tio.stderr)
	}
	if left := alive(pids); len(left) > 0 {
		t.Errorf("after the lock was lost, %v still run", left)
	}
}

// A signal that locker run was started with ignored (nohup) stays ignored, for the command too.
func TestRunKeepsIgnoredSignals(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	tio := newIO("", false)
	tio.exec(t, 0, "run", "--redis", url, "job", "--", "/bin/sh", "-c",
		`trap "" HUP; exec "$0" `+helperArg+` locker run --redis `+url+` job2 -c 'grep SigIgn /proc/$$/status'`, os.Args[0])
	_, mask, ok := strings.Cut(strings.TrimSpace(tio.stdout.String()), "\t")
	ignored, err := strconv.ParseUint(mask, 16, 64)
	if !ok || err != nil {
		t.Fatalf("stdout %q, want the command's SigIgn line\nstderr:\n%s", tio.stdout, tio.stderr)
	}
	if hup := uint64(1) << (syscall.SIGHUP - 1); ignored&hup == 0 {
		t.Errorf("the command's ignored signals %#x lack SIGHUP, which locker run was started with ignored", ignored)
	}
}
