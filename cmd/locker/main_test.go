package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// output is an io.Writer, safe for concurrent use, that a test can wait on.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// testIO is a command's streams in a test.
type testIO struct {
	*streams
	stdout, stderr *output
}

// newIO returns streams with stdin reading from in (nothing when empty).
func newIO(in string, terminal bool) testIO {
	tio := testIO{stdout: newOutput(), stderr: newOutput()}
	tio.streams = &streams{out: tio.stdout, err: tio.stderr, terminal: terminal}
	if in != "" {
		tio.in = strings.NewReader(in)
	}
	return tio
}

// exec runs locker with args and checks the exit code.
func (tio testIO) exec(t *testing.T, want int, args ...string) {
	t.Helper()
	if code := run(args, tio.streams); code != want {
		t.Fatalf("locker %q: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, tio.stdout, tio.stderr)
	}
}

// startMiniredis starts a miniredis on a loopback port, for the test, and returns its URL.
func startMiniredis(t *testing.T) string {
	return "redis://" + startMiniredisAt(t, "127.0.0.1:0").Addr()
}

// startMiniredisAt starts a miniredis listening on addr, for the test.
func startMiniredisAt(t *testing.T, addr string) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// A server makes a Redis server for a test and returns its URL.
type server struct {
	name  string
	start func(t *testing.T) string
}

var servers = []server{
	{"miniredis", startMiniredis},
	{"redis-server", func(t *testing.T) string { return "redis://" + redistest.StartServer(t).Addr }},
}

// onEachServer runs f as a parallel subtest on each of servers, with the URL of a server of its
// own.
func onEachServer(t *testing.T, f func(t *testing.T, url string)) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			f(t, srv.start(t))
		})
	}
}

// libClient is a Client of the library on the server at url, closed with the test.
func libClient(t *testing.T, url string, opts ...locker.Option) *locker.Client {
	t.Helper()
	cn, err := (&connFlags{urls: urlList{url}, driver: "goredis"}).connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := locker.New(cn.Locker, opts...)
	t.Cleanup(func() { c.Close(); cn.close() })
	return c
}

// lockKey takes the lock on key with lib, or fails the test.
func lockKey(t *testing.T, lib *locker.Client, key string) *locker.Lease {
	t.Helper()
	lease, err := lib.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// demoArgs is a short demo. The watchdog renews every ttl/3 (200ms), and the work at each depth
// (250ms) outlasts that. A lease survives a renewal about 400ms late: with 150ms leases, the
// demos failed with "lock lost" when four race-enabled test binaries shared the 2 cores.
var demoArgs = []string{"demo", "--ttl=600ms", "--work=250ms", "--rounds=2"}

// checkDemo checks the output of a demo of 2 rounds.
func checkDemo(t *testing.T, out string, firstLine string) {
	t.Helper()
	if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, firstLine) {
		t.Errorf("first line %q lacks %q", first, firstLine)
	}
	for _, want := range []string{
		"exclusion held: 4 critical sections",
		"re-entered (holds 2)",
		"renewed \"demo:invoice\"",
		"waited ",
		"released inner",
		"released outer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			tio := newIO("", false)
			tio.exec(t, 0, append(demoArgs, "--driver", driver)...)
			t.Logf("output:\n%s", tio.stdout)
			checkDemo(t, tio.stdout.String(), "backend: embedded miniredis (not a real Redis; timings are not Redis timings), driver "+driver)
		})
	}
}

func TestDemoRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			tio := newIO("", false)
			// Each driver on its own database: the demos run at once and use one key.
			url := "redis://" + srv.Addr + "/" + map[string]string{"goredis": "1", "rueidis": "2", "redigo": "3"}[driver]
			tio.exec(t, 0, append(demoArgs, "--redis", url, "--driver", driver)...)
			t.Logf("output:\n%s", tio.stdout)
			checkDemo(t, tio.stdout.String(), "backend: Redis at "+url+", driver "+driver)
		})
	}
}

func TestCheckFindsViolations(t *testing.T) {
	t.Parallel()
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	sections := []section{
		{"A", at(0), at(10)},
		{"B", at(10), at(20)}, // touching is fine: [0,10) and [10,20)
		{"A", at(25), at(40)},
		{"B", at(35), at(50)}, // overlaps A's second section
	}
	var out bytes.Buffer
	tl := &timeline{w: &out, start: start}
	err := check(tl, sections, locker.State{Locked: true, Holds: 1, TTL: time.Second}, 3, 0)
	if err == nil {
		t.Fatalf("check passed; output:\n%s", &out)
	}
	for _, want := range []string{
		"overlap: A [25ms, 40ms) and B [35ms, 50ms)",
		"still locked",
		"worker A completed 2 of 3 rounds",
		"never renewed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if n := strings.Count(out.String(), "overlap"); n != 1 {
		t.Errorf("%d overlaps reported, want 1:\n%s", n, &out)
	}
}

// TestNoServer checks that the commands that need a server say so when there is none. It is not
// parallel: it clears LOCKER_REDIS.
func TestNoServer(t *testing.T) {
	t.Setenv(redisEnv, "")
	for _, args := range [][]string{
		{"inspect", "k"},
		{"unlock", "--force", "--yes", "k"},
		{"run", "--key", "k", "--", "true"},
	} {
		tio := newIO("", false)
		tio.exec(t, 2, args...)
		if want := "no Redis server: pass --redis URL or set LOCKER_REDIS"; !strings.Contains(tio.stderr.String(), want) {
			t.Errorf("locker %q: stderr lacks %q:\n%s", args, want, tio.stderr)
		}
	}
	url := startMiniredis(t)
	t.Setenv(redisEnv, url)
	tio := newIO("", false)
	tio.exec(t, 0, "inspect", "k")
	if want := "key k: free\n"; tio.stdout.String() != want {
		t.Errorf("inspect with %s=%s: stdout %q, want %q", redisEnv, url, tio.stdout, want)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a substring of the expected stdout
		stderr string // a substring of the expected stderr
	}{
		{args: nil, code: 2, stderr: "The commands are"},
		{args: []string{"frobnicate"}, code: 2, stderr: "locker: unknown command \"frobnicate\"\nRun 'locker help' for the commands.\n"},
		{args: []string{strings.Repeat("x", 1<<20)}, code: 2, stderr: "(1048512 more bytes)"},
		{args: []string{"--help"}, code: 0, stdout: "inspect"},
		{args: []string{"help"}, code: 0, stdout: "unlock"},
		{args: []string{"help", "inspect"}, code: 0, stdout: "Usage: locker inspect [flags] KEY"},
		{args: []string{"help", "run"}, code: 0, stdout: "Usage: locker run"},
		{args: []string{"help", "nope"}, code: 2, stderr: "locker help: unknown command \"nope\""},
		{args: []string{"--version"}, code: 0, stdout: "locker "},
		{args: []string{"version"}, code: 0, stdout: "(go1."},
		{args: []string{"demo", "--help"}, code: 0, stdout: "-ttl"},
		{args: []string{"demo", "-h"}, code: 0, stdout: "an embedded miniredis"},
		{args: []string{"run", "--help"}, code: 0, stdout: "docs/locker-run.md"},
		{args: []string{"inspect", "--help"}, code: 0, stdout: "-json"},
		{args: []string{"unlock", "--help"}, code: 0, stdout: "-force"},
		{args: []string{"unlock", "--help"}, code: 0, stdout: "-driver driver"},
		{args: []string{"demo", "--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"run", "--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"inspect", "k", "--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"demo", "--ttl", "soon"}, code: 2, stderr: "invalid value"},
		{args: []string{"demo", "--ttl", "0s"}, code: 2, stderr: "--ttl 0s: must be at least 1ms"},
		{args: []string{"demo", "--rounds", "0"}, code: 2, stderr: "--rounds 0: must be at least 1"},
		{args: []string{"demo", "--work", "10ms"}, code: 2, stderr: "--work 10ms: must be more than a third of --ttl 200ms"},
		{args: []string{"demo", "extra"}, code: 2, stderr: "unexpected arguments: extra"},
		{args: []string{"demo", "--driver", "jedis"}, code: 2, stderr: `--driver "jedis": must be one of goredis, rueidis, redigo`},
		{args: []string{"demo", "--redis", "http://u:secret@host"}, code: 2, stderr: `got "http://u:xxxxx@host"`},
		{args: []string{"inspect", "--redis", "redis://h"}, code: 2, stderr: "no key given"},
		{args: []string{"inspect", "--redis", "redis://h", "a", "b"}, code: 2, stderr: "one key at a time"},
		{args: []string{"inspect", "--redis", startMiniredis(t), strings.Repeat("k", 100000)}, code: 2, stderr: "locker inspect: the key is 100000 bytes, over the limit of 65536\n"},
		{args: []string{"unlock", "--redis", startMiniredis(t), "--force", "--yes", strings.Repeat("k", 100000)}, code: 2, stderr: "locker unlock: the key is 100000 bytes, over the limit of 65536\n"},
		{args: []string{"unlock", "--redis", "redis://h", "--yes", "k"}, code: 2, stderr: "--force is required"},
		{args: []string{"run", "--redis", "redis://h"}, code: 2, stderr: "no key given"},
		{args: []string{"run", "--redis", "redis://h", "--", "true"}, code: 2, stderr: "no command given"},
		{args: []string{"run", "--redis", "redis://h", "--key", "k"}, code: 2, stderr: "no command given"},
		{args: []string{"run", "--redis", "redis://h", "--key", "k", "--grace=-1s", "true"}, code: 2, stderr: "--grace -1s: must not be negative"},
		{args: []string{"demo", "--ttl=600ms", "--work=250ms", "--rounds=1"}, code: 0, stdout: "exclusion held: 2 critical sections"},
	} {
		tio := newIO("", false)
		code := run(tc.args, tio.streams)
		if code != tc.code {
			t.Errorf("run(%q) = %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, tio.stdout, tio.stderr)
			continue
		}
		if !strings.Contains(tio.stdout.String(), tc.stdout) {
			t.Errorf("run(%q): stdout lacks %q:\n%s", tc.args, tc.stdout, tio.stdout)
		}
		if !strings.Contains(tio.stderr.String(), tc.stderr) {
			t.Errorf("run(%q): stderr lacks %q:\n%s", tc.args, tc.stderr, tio.stderr)
		}
		if tc.code == 2 && tio.stdout.String() != "" {
			t.Errorf("run(%q): a usage error printed to stdout:\n%s", tc.args, tio.stdout)
		}
		// A usage error is one line and a pointer to the help, never the whole help (no args
		// at all is the exception: the command list is the answer).
		if tc.code == 2 && len(tc.args) > 0 && (strings.Count(tio.stderr.String(), "\n") != 2 || !strings.Contains(tio.stderr.String(), "\nRun 'locker ")) {
			t.Errorf("run(%q): a usage error of more than one line and the pointer to the help:\n%s", tc.args, tio.stderr)
		}
		// No message carries two prefixes.
		if strings.Contains(tio.stderr.String(), ": locker: ") {
			t.Errorf("run(%q): two prefixes in %q", tc.args, tio.stderr)
		}
	}
}

// The package doc, which "go doc ./cmd/locker" shows, lists every command.
func TestPackageDocListsCommands(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	names := []string{"help", "version"}
	for _, c := range commands {
		names = append(names, c.name)
	}
	for _, name := range names {
		if !strings.Contains(doc, "\n\t"+name+" ") && !strings.Contains(doc, "\n    "+name+" ") {
			t.Errorf("the package doc does not list the command %q:\n%s", name, doc)
		}
	}
}
