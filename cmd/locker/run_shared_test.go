//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// waitState polls the state of key until ok accepts it; it fails the test after 10 seconds.
// Polling observes the server; it does not stand in for a synchronisation.
func waitState(t *testing.T, lib *locker.Client, key string, what string, ok func(locker.State) bool) locker.State {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := lib.Inspect(context.Background(), key)
		if err != nil {
			t.Fatalf("inspect %s: %v", key, err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the key is %+v; want %s", st, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// notExited fails the test if code has a value: that run should still wait or run.
func notExited(t *testing.T, code <-chan int, tio testIO, what string) {
	t.Helper()
	select {
	case c := <-code:
		t.Fatalf("%s exited (%d)\nstdout:\n%s\nstderr:\n%s", what, c, tio.stdout, tio.stderr)
	default:
	}
}

// Two runs with --shared hold the key at once, while an exclusive run waits for both; once it
// waits, a new shared run is refused (writers are not starved), and the exclusive run gets the
// key when the readers have gone.
func TestRunShared(t *testing.T) {
	t.Parallel()
	onEachServer(t, runShared)
}

// runShared is TestRunShared on the server at url.
func runShared(t *testing.T, url string) {
	lib := libClient(t, url)
	var pids []int
	var codes []<-chan int
	var tios []testIO
	for i := range 2 {
		tio := newIO("", false)
		codes = append(codes, goRun(tio, runArgs(url, "job", []string{"--shared"}, child("signals"))))
		tios = append(tios, tio)
		pids = append(pids, readyPID(t, tio.stdout)) // the second runs while the first does
		st := waitState(t, lib, "job", "shared", func(st locker.State) bool { return st.Readers == i+1 })
		if !st.Locked || !st.Shared || st.Holds != i+1 {
			t.Errorf("with %d shared runs the key is %+v; want shared by %d", i+1, st, i+1)
		}
	}
	writer := newIO("", false)
	wcode := goRun(writer, []string{"run", "--redis", url, "job", "-c", "echo writer ran"})
	waitState(t, lib, "job", "an exclusive run queued", func(st locker.State) bool { return st.Queued == 1 })
	notExited(t, wcode, writer, "the exclusive run")

	late := newIO("", false)
	late.exec(t, 1, "run", "-s", "-n", "-v", "--redis", url, "job", "-c", "echo late ran")
	if late.stdout.String() != "" {
		t.Errorf("a shared run went past the waiting writer: %s", late.stdout)
	}
	if want := `locker run: lock "job" not obtained: a writer holds it or waits for it`; !strings.Contains(late.stderr.String(), want) {
		t.Errorf("-v: stderr lacks %q:\n%s", want, late.stderr)
	}

	for i, pid := range pids {
		notExited(t, wcode, writer, "the exclusive run")
		if writer.stdout.String() != "" {
			t.Fatalf("the exclusive run ran beside %d shared runs", 2-i)
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if c := exitCode(t, codes[i]); c != 128+int(syscall.SIGTERM) {
			t.Errorf("shared run %d: exit %d\nstderr:\n%s", i, c, tios[i].stderr)
		}
	}
	if c := exitCode(t, wcode); c != 0 || writer.stdout.String() != "writer ran\n" {
		t.Errorf("the exclusive run: exit %d, stdout %q\nstderr:\n%s", c, writer.stdout, writer.stderr)
	}
	if st, err := lib.Inspect(context.Background(), "job"); err != nil || st.Locked || st.Queued != 0 {
		t.Errorf("after the runs the key is %+v, %v; want free, nobody queued", st, err)
	}
}

// Runs with --fair get the lock in the order in which they asked; one that gives up while it
// waits leaves the queue, and does not hold up those behind it.
func TestRunFair(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	holder := lockKey(t, lib, "job")
	file := filepath.Join(t.TempDir(), "order")
	line := func(n string) string { return "echo " + n + " >> " + file }

	first := newIO("", false)
	firstCode := goRun(first, []string{"run", "--fair", "--redis", url, "job", "-c", line("1")})
	waitState(t, lib, "job", "1 queued", func(st locker.State) bool { return st.Queued == 1 })
	quitter, _, qerr, qexited := lockerProcess(t, nil, "run", "--fair", "--redis", url, "job", "-c", line("2"))
	waitState(t, lib, "job", "2 queued", func(st locker.State) bool { return st.Queued == 2 })
	third := newIO("", false)
	thirdCode := goRun(third, []string{"run", "--fair", "--redis", url, "job", "-c", line("3")})
	waitState(t, lib, "job", "3 queued", func(st locker.State) bool { return st.Queued == 3 })

	// A --fair -n does not jump the queue, nor does it join it.
	try := newIO("", false)
	try.exec(t, 1, "run", "--fair", "-n", "--redis", url, "job", "-c", line("try"))

	if err := quitter.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := waitExit(t, quitter, qexited); c != 128+int(syscall.SIGTERM) {
		t.Errorf("the run that gave up: exit %d\nstderr:\n%s", c, qerr)
	}
	waitState(t, lib, "job", "2 queued once one gave up", func(st locker.State) bool { return st.Queued == 2 })
	notExited(t, firstCode, first, "the first fair run")
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	for i, run := range []struct {
		tio  testIO
		code <-chan int
	}{{first, firstCode}, {third, thirdCode}} {
		if c := exitCode(t, run.code); c != 0 {
			t.Errorf("fair run %d: exit %d\nstderr:\n%s", i, c, run.tio.stderr)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "1\n3\n"; got != want {
		t.Errorf("the runs ran in the order %q, want %q", got, want)
	}
	if st, err := lib.Inspect(context.Background(), "job"); err != nil || st.Locked || st.Queued != 0 {
		t.Errorf("after the runs the key is %+v, %v; want free, nobody queued", st, err)
	}
}

// Nested runs and shared holds: a nested --shared inside an exclusive run adds a shared hold to
// it (a downgrade), one inside a shared run re-enters it, and a nested exclusive run inside a
// shared one is refused at once, with the conflict code and a message, changing nothing.
func TestRunNestedShared(t *testing.T) {
	t.Parallel()
	onEachServer(t, runNestedShared)
}

// runNestedShared is TestRunNestedShared on the server at url.
func runNestedShared(t *testing.T, url string) {
	bin := os.Args[0] + " " + helperArg
	holds := bin + " holds " + url + " job"
	nested := func(flags string) string {
		return bin + " locker run -n " + flags + " --redis " + url + " job -- " + holds + "; echo inner $?; " + holds
	}
	for _, tc := range []struct {
		outer, inner string
		stdout       string
		stderr       string // "" for none
	}{
		{"", "--shared", "holds 2\ninner 0\nholds 1\n", ""},
		{"--shared", "-s", "holds 2\ninner 0\nholds 1\n", ""},
		{"--shared", "", "inner 1\nholds 1\n", `locker run: lock "job" not obtained: the outer locker run holds it shared (--shared), and an exclusive hold inside it would be an upgrade`},
		{"--shared", "-x -E 75", "inner 75\nholds 1\n", "an exclusive hold inside it would be an upgrade"},
	} {
		tio := newIO("", false)
		args := []string{"run", "--redis", url}
		if tc.outer != "" {
			args = append(args, tc.outer)
		}
		tio.exec(t, 0, append(args, "job", "-c", nested(tc.inner))...)
		if tio.stdout.String() != tc.stdout {
			t.Errorf("outer %q, inner %q: stdout %q, want %q\nstderr:\n%s", tc.outer, tc.inner, tio.stdout, tc.stdout, tio.stderr)
		}
		switch {
		case tc.stderr == "" && tio.stderr.String() != "":
			t.Errorf("outer %q, inner %q: stderr:\n%s", tc.outer, tc.inner, tio.stderr)
		case !strings.Contains(tio.stderr.String(), tc.stderr):
			t.Errorf("outer %q, inner %q: stderr lacks %q:\n%s", tc.outer, tc.inner, tc.stderr, tio.stderr)
		}
		if st, err := libClient(t, url).Inspect(context.Background(), "job"); err != nil || st.Locked {
			t.Errorf("outer %q, inner %q: after the runs the key is %+v, %v; want free", tc.outer, tc.inner, st, err)
		}
	}
}

// Inspect of a key held shared: the readers, all their holds, and the writer queued for it.
func TestInspectShared(t *testing.T) {
	t.Parallel()
	onEachServer(t, func(t *testing.T, url string) {
		lib := libClient(t, url, locker.WithTTL(10*time.Second))
		ctx := context.Background()
		var leases []*locker.Lease
		for _, c := range []context.Context{ctx, ctx, nil} { // nil: re-enter the first
			if c == nil {
				c = leases[0].Context()
			}
			l, err := lib.RLock(c, "report")
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		defer func() {
			for _, l := range leases {
				l.Unlock()
			}
		}()

		checkText := func(want string) {
			t.Helper()
			tio := newIO("", false)
			tio.exec(t, 0, "inspect", "--redis", url, "report")
			line, readers, _ := strings.Cut(tio.stdout.String(), "\n")
			// A line per reader that the backend lists (State.Holders): TestInspectHolders
			// checks them.
			if st, err := lib.Inspect(ctx, "report"); err != nil || strings.Count(readers, "\n") != len(st.Holders) || strings.Count(readers, "  reader ") != len(st.Holders) {
				t.Errorf("stdout %q: want a line per reader of %+v (%v)", tio.stdout, st, err)
			}
			before, after, ok := strings.Cut(line, ", TTL ")
			ttl, queued, more := strings.Cut(after, ",")
			got := before + ", TTL D"
			if more {
				got += "," + queued
			}
			d, err := time.ParseDuration(ttl)
			if !ok || got != want || err != nil || d <= 0 || d > 10*time.Second {
				t.Errorf("stdout %q, want %q with 0 < D <= 10s", line, want)
			}
		}
		checkJSON := func(queued int) {
			t.Helper()
			tio := newIO("", false)
			tio.exec(t, 0, "inspect", "--json", "--redis", url, "report")
			var got struct {
				Locked  bool   `json:"locked"`
				Owner   string `json:"owner"`
				Holds   int    `json:"holds"`
				TTLms   int64  `json:"ttl_ms"`
				Shared  *bool  `json:"shared"`
				Readers *int   `json:"readers"`
				Queued  *int   `json:"queued"`
			}
			if err := json.Unmarshal([]byte(tio.stdout.String()), &got); err != nil {
				t.Fatalf("--json: %v in %q", err, tio.stdout)
			}
			if !got.Locked || got.Owner == "" || got.Holds != 3 || got.TTLms <= 0 || got.Shared == nil || !*got.Shared ||
				got.Readers == nil || *got.Readers != 2 || got.Queued == nil || *got.Queued != queued {
				t.Errorf("--json: %s; want locked, shared by 2 readers, 3 holds, %d queued", tio.stdout, queued)
			}
		}
		checkText("key report: shared by 2 readers, 3 holds, TTL D")
		checkJSON(0)

		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			l, err := lib.Lock(wctx, "report")
			if err == nil {
				l.Unlock()
			}
			done <- err
		}()
		waitState(t, lib, "report", "a writer queued", func(st locker.State) bool { return st.Queued == 1 })
		checkText("key report: shared by 2 readers, 3 holds, TTL D, 1 queued")
		checkJSON(1)
		cancel()
		if err := <-done; err == nil {
			t.Error("the writer got the lock while readers held it")
		}

		tio := newIO("", false)
		tio.exec(t, 0, "inspect", "--json", "--redis", url, "free-key")
		if want := `"shared":false,"readers":0,"queued":0,"limit":0,"holders":[]}`; !strings.Contains(tio.stdout.String(), want) {
			t.Errorf("--json of a free key: %s; want it to end with %s", tio.stdout, want)
		}
	})
}

// --shared and --fair on a quorum are a usage error that says why, and nothing is locked.
func TestRunSharedQuorum(t *testing.T) {
	t.Parallel()
	var args, urls []string
	for range 3 {
		u := startMiniredis(t)
		urls = append(urls, u)
		args = append(args, "--redis", u)
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--shared"}, "--shared: a quorum (3 servers) has no shared locks or wait queues; use a single --redis server"},
		{[]string{"-s", "--fair", "-n"}, "--shared and --fair: a quorum (3 servers)"},
		{[]string{"--fair"}, "--fair: a quorum (3 servers)"},
	} {
		tio := newIO("", false)
		tio.exec(t, 2, append(append(append([]string{"run"}, args...), tc.flags...), "job", "-c", "echo ran")...)
		if !strings.Contains(tio.stderr.String(), tc.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", tc.flags, tc.want, tio.stderr)
		}
		if tio.stdout.String() != "" {
			t.Errorf("%q: the command ran: %s", tc.flags, tio.stdout)
		}
	}
	for i, u := range urls {
		if st, err := libClient(t, u).Inspect(context.Background(), "job"); err != nil || st.Locked {
			t.Errorf("server %d: %+v, %v; want free", i, st, err)
		}
	}
}

// A --fair waiter that dies (kill -9: it cannot leave the queue) keeps its place, first in the
// queue: the holder's unlock grants it the key (see locker.Granter), for the grant's lease
// (min(--ttl, 2s)); meanwhile both a --fair -n and a plain -n are refused, then a --fair run gets
// the key once the grant has lapsed.
func TestRunFairDeadWaiter(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)
	holder := lockKey(t, lib, "job")
	dead, _, _, exited := lockerProcess(t, nil, "run", "--fair", "--ttl", "3s", "--redis", url, "job", "-c", "echo dead ran")
	waitState(t, lib, "job", "1 queued", func(st locker.State) bool { return st.Queued == 1 })
	if err := dead.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, dead, exited)
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	fair, plain := newIO("", false), newIO("", false)
	fairCode := run([]string{"run", "--fair", "-n", "--redis", url, "job", "-c", "echo fair ran"}, fair.streams)
	plainCode := run([]string{"run", "-n", "--redis", url, "job", "-c", "echo plain ran"}, plain.streams)
	if d := time.Since(start); d >= 2*time.Second {
		t.Skipf("the machine is too slow: the dead waiter's grant may have lapsed before the -n runs (%v)", d)
	}
	if fairCode != 1 || fair.stdout.String() != "" {
		t.Errorf("--fair -n while the dead waiter's grant lasts: exit %d, stdout %q\nstderr:\n%s", fairCode, fair.stdout, fair.stderr)
	}
	if plainCode != 1 || plain.stdout.String() != "" {
		t.Errorf("-n while the dead waiter's grant lasts: exit %d, stdout %q\nstderr:\n%s", plainCode, plain.stdout, plain.stderr)
	}

	fair = newIO("", false)
	fair.exec(t, 0, "run", "--fair", "--redis", url, "job", "-c", "echo fair ran")
	d := time.Since(start)
	if fair.stdout.String() != "fair ran\n" || d > 10*time.Second {
		t.Errorf("--fair after a dead waiter: stdout %q after %v, want it within about 3s", fair.stdout, d)
	}
	t.Logf("the fair run got the lock %v after the release", d)
}
