package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// A run with --limit killed with SIGKILL while its command runs: the supervisor ends the command,
// and the permit frees at the latest when its lease ends, so that a run waiting for a permit of
// the full semaphore gets it within the TTL of the kill, and never while the killed run's command
// still runs.
func TestRunLimitKilled(t *testing.T) {
	t.Parallel()
	onEachSemServer(t, runLimitKilled)
}

// runLimitKilled is TestRunLimitKilled on the server at url.
func runLimitKilled(t *testing.T, url string) {
	const ttl = 3 * time.Second
	lib := libClient(t, url, locker.WithTTL(ttl))
	ctx := context.Background()
	other, err := lib.TryAcquire(ctx, "job", 2) // one permit, held throughout
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock()
	first, stdout, stderr, _ := lockerProcess(t, nil, "run", "--limit", "2", "--ttl", ttl.String(), "--redis", url, "job", "--", os.Args[0], helperArg, "signals")
	pid := readyPID(t, stdout)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if _, err := lib.TryAcquire(ctx, "job", 2); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("a third permit while the run's command runs: %v, want ErrNotObtained", err)
	}
	second := newIO("", false)
	code := goRun(second, []string{"run", "--limit", "2", "--ttl", ttl.String(), "--redis", url, "job", "--", os.Args[0], helperArg, "signals"})

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var gone, got time.Duration
	deadline := time.NewTimer(3 * ttl)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // a poll interval, not a synchronisation
	defer tick.Stop()
	for gone == 0 || got == 0 {
		if gone == 0 && procGone(pid) {
			gone = time.Since(killed)
		}
		if got == 0 && strings.Contains(second.stdout.String(), "ready") {
			got = time.Since(killed)
			if !procGone(pid) {
				t.Fatalf("the waiting run got a permit %v after the kill while the killed run's command (%d) still ran", got, pid)
			}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("after %v: the killed run's command gone: %v; the waiting run has a permit: %v\nkilled run's stderr:\n%s\nwaiting run's stderr:\n%s",
				3*ttl, gone > 0, got > 0, stderr, second.stderr)
		}
	}
	t.Logf("kill -9 of a run with --limit (ttl %v): its command gone after %v; the waiting run got the permit after %v", ttl, gone, got)
	// The lease was renewed at most ttl/3 before the kill: it ends within the TTL of it. The
	// waiter tries again when the soonest lease it saw ends, at once: allow a round trip and a
	// loaded machine's scheduling.
	if got > ttl+500*time.Millisecond {
		t.Errorf("the waiting run got the permit %v after the kill, want within the TTL (%v)", got, ttl)
	}
	if want := "locker run: locker run died; ending the command and its processes"; !strings.Contains(stderr.String(), want) {
		t.Errorf("the killed run's stderr lacks %q:\n%s", want, stderr)
	}
	syscall.Kill(readyPID(t, second.stdout), syscall.SIGTERM)
	if c := exitCode(t, code); c != 128+int(syscall.SIGTERM) {
		t.Errorf("the waiting run: exit %d\nstderr:\n%s", c, second.stderr)
	}
}
