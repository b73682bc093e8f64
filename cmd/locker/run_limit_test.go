//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// slot is the helper "slot DIR": a command that counts the commands running beside it. It makes
// the file DIR/run.PID, then appends "running N" to DIR/log, N being the number of DIR/run.*
// files: every command running at that moment (those that started before have their file, and
// those that start after count this one), waits until the file DIR/gate exists (at most 20s,
// else it exits 99), and removes its file.
func slot(dir string) int {
	mine := filepath.Join(dir, "run."+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(mine, nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 98
	}
	defer os.Remove(mine)
	runs, err := filepath.Glob(filepath.Join(dir, "run.*"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 98
	}
	log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 98
	}
	fmt.Fprintf(log, "running %d\n", len(runs)) // one write, O_APPEND: lines do not mix
	log.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(dir, "gate")); err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			return 99
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
}

// logLines polls DIR/log until it has n lines, and returns them; it fails the test after 20s.
func logLines(t *testing.T, dir string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) == 0 {
			lines = nil
		}
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s the commands logged %q; want %d lines", lines, n)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval
	}
}

// Of M runs with --limit N started at once, N run their commands together while the others wait
// (a run with -n is refused meanwhile); when those go, the others run, never more than N at once,
// and all of them in the end.
func TestRunLimit(t *testing.T) {
	t.Parallel()
	onEachSemServer(t, runLimit)
}

// runLimit is TestRunLimit on the server at url.
func runLimit(t *testing.T, url string) {
	const n, m = 2, 5
	dir := t.TempDir()
	lib := libClient(t, url)
	type proc struct {
		exit   func() int
		stderr *output
	}
	var procs []proc
	for range m {
		cmd, _, stderr, exited := lockerProcess(t, nil, "run", "--limit", strconv.Itoa(n), "--redis", url, "job", "--", os.Args[0], helperArg, "slot", dir)
		procs = append(procs, proc{func() int { return waitExit(t, cmd, exited) }, stderr})
	}

	first := logLines(t, dir, n)
	st, err := lib.Inspect(context.Background(), "job")
	if err != nil || st.Limit != n || len(st.Holders) != n {
		t.Errorf("while %d commands wait at the gate, the key is %+v, %v; want a semaphore of %d with %d holders", n, st, err, n, n)
	}
	try := newIO("", false)
	try.exec(t, 1, "run", "-n", "--limit", strconv.Itoa(n), "--redis", url, "job", "-c", "echo ran")
	if try.stdout.String() != "" {
		t.Errorf("a run with -n ran beside %d: %s", n, try.stdout)
	}
	if lines := logLines(t, dir, 0); len(lines) != n {
		t.Errorf("while %d commands run, the log has %q; want %d lines: more ran", n, lines, n)
	}
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		if c := p.exit(); c != 0 {
			t.Errorf("run %d: exit %d\nstderr:\n%s", i, c, p.stderr)
		}
	}

	lines := logLines(t, dir, m)
	most := 0
	for _, line := range lines {
		k, err := strconv.Atoi(strings.TrimPrefix(line, "running "))
		if err != nil {
			t.Fatalf("log line %q is not \"running N\"", line)
		}
		most = max(most, k)
	}
	if len(lines) != m || most != n {
		t.Errorf("the commands logged %q (the first %d: %q); want %d lines, at most %d running at once and %d at some point", lines, n, first, m, n, n)
	}
	if st, err := lib.Inspect(context.Background(), "job"); err != nil || st.Locked {
		t.Errorf("after the runs the key is %+v, %v; want free", st, err)
	}
}

// With every permit taken, -n and -w give up with the conflict code (1, or -E) and always say how
// many permits are taken and when the soonest lease ends; a run with another --limit, or none, is
// refused at once with the conflict code and a line that says how the key is held, as is a run
// with --limit on a key held as a lock; -v says which permit a run got.
func TestRunLimitNotObtained(t *testing.T) {
	t.Parallel()
	onEachSemServer(t, runLimitNotObtained)
}

// runLimitNotObtained is TestRunLimitNotObtained on the server at url.
func runLimitNotObtained(t *testing.T, url string) {
	lib := libClient(t, url, locker.WithTTL(10*time.Second))
	ctx := context.Background()
	var permits []*locker.Lease
	for range 2 {
		l, err := lib.TryAcquire(ctx, "job", 2)
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, l)
	}
	lock := lockKey(t, lib, "locked")
	defer lock.Unlock()

	const taken = `locker run: permit of semaphore "job" not obtained: 2 of 2 permits taken, the soonest of their leases ends in `
	for _, tc := range []struct {
		flags  []string
		key    string
		code   int
		min    time.Duration // the least time before giving up
		stderr string
	}{
		{flags: []string{"-n", "--limit", "2"}, code: 1, stderr: taken},
		{flags: []string{"--limit=2", "--nb", "-E", "75"}, code: 75, stderr: taken},
		{flags: []string{"--limit", "2", "-w", "0.3"}, code: 1, min: 300 * time.Millisecond,
			stderr: `locker run: permit of semaphore "job" not obtained within 300ms: 2 of 2 permits taken, the soonest of their leases ends in `},
		// Another limit, or none, fails at once, without -n too.
		{flags: []string{"--limit", "3"}, code: 1,
			stderr: `locker run: permit of semaphore "job" not obtained: the key is held as a semaphore of 2 (--limit 2), and this run asks for a semaphore of 3 (--limit 3): the runs on a key must all give the same --limit`},
		{flags: []string{"-n", "--limit", "1", "-E", "75"}, code: 75, stderr: "held as a semaphore of 2 (--limit 2), and this run asks for a semaphore of 1 (--limit 1)"},
		{flags: nil, code: 1, stderr: `locker run: lock "job" not obtained: the key is held as a semaphore of 2 (--limit 2), and this run asks for a lock (no --limit)`},
		{flags: []string{"-s", "-n"}, code: 1, stderr: "held as a semaphore of 2 (--limit 2), and this run asks for a shared lock (-s)"},
		{flags: []string{"--limit", "2"}, key: "locked", code: 1,
			stderr: `locker run: permit of semaphore "locked" not obtained: the key is held as a lock (no --limit), and this run asks for a semaphore of 2 (--limit 2)`},
	} {
		key := tc.key
		if key == "" {
			key = "job"
		}
		tio := newIO("", false)
		start := time.Now()
		code := goRun(tio, append(append([]string{"run", "--redis", url}, tc.flags...), key, "-c", "echo ran"))
		c := exitCode(t, code)
		d := time.Since(start)
		if c != tc.code || !strings.Contains(tio.stderr.String(), tc.stderr) || strings.Count(tio.stderr.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant exit %d and one line with %q", tc.flags, c, tio.stderr, tc.code, tc.stderr)
		}
		if tio.stdout.String() != "" {
			t.Errorf("%q: the command ran: %s", tc.flags, tio.stdout)
		}
		if d < tc.min {
			t.Errorf("%q: gave up after %v, want at least %v", tc.flags, d, tc.min)
		}
	}
	if st, err := lib.Inspect(ctx, "job"); err != nil || st.Limit != 2 || len(st.Holders) != 2 || st.Holds != 2 {
		t.Errorf("after the refused runs the key is %+v, %v; want the 2 permits as they were", st, err)
	}

	if err := permits[0].Unlock(); err != nil {
		t.Fatal(err)
	}
	defer permits[1].Unlock()
	tio := newIO("", false)
	tio.exec(t, 0, "run", "-v", "--fencing", "--owner-label", "batch-1", "--limit", "2", "--redis", url, "job", "-c", "echo ran")
	out := tio.stderr.String()
	for _, want := range []string{
		`locker run: getting permit of semaphore "job"` + "\n",
		`locker run: getting permit of semaphore "job" took `,
		`locker run: got a permit of semaphore "job" as batch-1#`,
		"…, fencing token ",
		"; 2 of 2 permits taken\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-v: stderr lacks %q:\n%s", want, out)
		}
	}
	if tio.stdout.String() != "ran\n" {
		t.Errorf("-v: stdout %q, want the command's", tio.stdout)
	}
}

// A nested run with the same --limit re-enters the outer run's permit (no second permit: -n
// succeeds with every permit taken); a nested run with another --limit, or none, and a nested
// --limit inside a lock's run, are refused at once with the conflict code and a line saying why.
func TestRunLimitNested(t *testing.T) {
	t.Parallel()
	onEachSemServer(t, runLimitNested)
}

// runLimitNested is TestRunLimitNested on the server at url.
func runLimitNested(t *testing.T, url string) {
	lib := libClient(t, url, locker.WithTTL(10*time.Second))
	other, err := lib.TryAcquire(context.Background(), "job", 2) // the other permit
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock()
	bin := os.Args[0] + " " + helperArg
	permits := bin + " permits " + url + " job"
	nested := func(flags string) string {
		return bin + " locker run -n " + flags + " --redis " + url + " job -- " + permits + "; echo inner $?; " + permits
	}
	for _, tc := range []struct {
		outer, inner string
		stdout       string
		stderr       string // "" for none
	}{
		{"--limit 2", "--limit 2", "taken 2 holds 3\ninner 0\ntaken 2 holds 2\n", ""},
		{"--limit 2", "-v --limit 2", "taken 2 holds 3\ninner 0\ntaken 2 holds 2\n", "locker run: re-entered the permit of an outer locker run (holds 2)\n"},
		{"--limit 2", "--limit 3", "inner 1\ntaken 2 holds 2\n",
			`locker run: permit of semaphore "job" not obtained: the outer locker run holds it as a semaphore of 2 (--limit 2), and this run asks for a semaphore of 3 (--limit 3): a nested run re-enters the outer hold only with the same --limit (none for a lock)`},
		{"--limit 2", "-E 75", "inner 75\ntaken 2 holds 2\n",
			`locker run: lock "job" not obtained: the outer locker run holds it as a semaphore of 2 (--limit 2), and this run asks for a lock (no --limit)`},
	} {
		tio := newIO("", false)
		args := append([]string{"run", "--redis", url}, strings.Fields(tc.outer)...)
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
	}

	// A nested --limit inside a lock's run.
	tio := newIO("", false)
	tio.exec(t, 0, "run", "--redis", url, "plain", "-c", bin+" locker run --limit 2 --redis "+url+" plain -c 'echo inner ran'; echo inner $?")
	if want := "inner 1\n"; tio.stdout.String() != want {
		t.Errorf("--limit inside a lock's run: stdout %q, want %q\nstderr:\n%s", tio.stdout, want, tio.stderr)
	}
	if want := `locker run: permit of semaphore "plain" not obtained: the outer locker run holds it as a lock (no --limit), and this run asks for a semaphore of 2 (--limit 2)`; !strings.Contains(tio.stderr.String(), want) {
		t.Errorf("--limit inside a lock's run: stderr lacks %q:\n%s", want, tio.stderr)
	}
	if st, err := lib.Inspect(context.Background(), "job"); err != nil || len(st.Holders) != 1 || st.Holds != 1 {
		t.Errorf("after the runs the key is %+v, %v; want the other permit alone", st, err)
	}
}

// --limit is refused with a usage error when it is below 1 or not a number, with -s or -x, and on
// a quorum (as -s is); nothing is locked.
func TestRunLimitUsage(t *testing.T) {
	t.Parallel()
	var quorum, urls []string
	for range 3 {
		u := startMiniredis(t)
		urls = append(urls, u)
		quorum = append(quorum, "--redis", u)
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--limit", "0"}, "--limit 0: a semaphore needs 1 permit or more"},
		{[]string{"--limit=-2"}, "--limit -2: a semaphore needs 1 permit or more"},
		{[]string{"--limit", "two"}, `invalid value "two" for flag -limit: want a whole number of permits, 1 or more`},
		{[]string{"--limit", "2", "-s"}, "--limit with -s or -x"},
		{[]string{"-x", "--limit", "2"}, "--limit with -s or -x"},
		{[]string{"-s=false", "--limit", "2"}, "--limit with -s or -x"},
		{[]string{"--limit", "2", "--fair"}, "--limit: a quorum (3 servers) has no semaphores; use a single --redis server"},
	} {
		tio := newIO("", false)
		tio.exec(t, 2, append(append(append([]string{"run"}, quorum...), tc.flags...), "job", "-c", "echo ran")...)
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
