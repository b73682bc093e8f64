package main

import (
	"net"
	"strings"
	"testing"

	"github.com/hashlock/locker"
)

// Every command that meets the same fault answers it the same way: with the same exit code and,
// after "locker COMMAND: ", one line that says each thing once (no clause twice, the package
// named once, the key or URL once).
func TestSameFaultSameAnswer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "redis://" + l.Addr().String() // a port nobody listens on, once closed
	l.Close()
	up := startMiniredis(t)
	long := strings.Repeat("k", locker.MaxKeyLen+1)

	// each returns the command lines of every command on key with the server url.
	each := func(url, key string, extra ...string) [][]string {
		return [][]string{
			append([]string{"inspect", "--redis", url, key}, extra...),
			append([]string{"unlock", "--redis", url, "--force", "--yes", key}, extra...),
			append([]string{"run", "--redis", url, "-n", key, "true"}, extra...),
			append([]string{"run", "--redis", url, "--key", key, "--", "true"}, extra...),
		}
	}
	type fault struct {
		name  string
		lines [][]string
		code  int
		says  string // what the line says after "locker COMMAND: ", or a part of it
	}
	faults := []fault{
		{"empty key", each(up, ""), 2, "the key is empty"},
		{"key too long", each(up, long), 2, "the key is 65537 bytes, over the limit of 65536"},
		{"URL without its scheme", each(strings.TrimPrefix(up, "redis://"), "k"), 2,
			"--redis: the URL lacks its scheme: want " + up + " (or rediss:// for TLS)"},
	}
	unreachable := append(each(down, "k"), []string{"demo", "--redis", down}, []string{"bench", "--redis", down, "--time", "1ms"})
	for _, driver := range drivers[1:] {
		unreachable = append(unreachable, []string{"inspect", "--redis", down, "--driver", driver, "k"})
	}
	faults = append(faults, fault{"unreachable", unreachable, exitUnavailable, down + ": "})
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for _, args := range f.lines {
				t.Run(args[0], func(t *testing.T) {
					t.Parallel()
					answers(t, args, f.code, f.says)
				})
			}
		})
	}
}

// answers runs locker with args and checks its exit code, and that the first line on stderr is
// "locker COMMAND: " and says says, each thing once.
func answers(t *testing.T, args []string, code int, says string) {
	t.Helper()
	tio := newIO("", false)
	tio.exec(t, code, args...)
	line, _, _ := strings.Cut(tio.stderr.String(), "\n")
	prefix := "locker " + args[0] + ": "
	said, ok := strings.CutPrefix(line, prefix)
	if !ok || !strings.Contains(said, says) {
		t.Errorf("locker %.80q: stderr's first line %.300q, want %q then %q", args, line, prefix, says)
	}
	sayOnce(t, args, line)
}

// sayOnce fails the test if line names the package more than once, or repeats a clause (the
// text between ": " separators) or a quoted key.
func sayOnce(t *testing.T, args []string, line string) {
	t.Helper()
	if n := strings.Count(line, "locker"); n != 1 {
		t.Errorf("locker %.80q: %q says locker %d times", args, line, n)
	}
	seen := map[string]bool{}
	for _, clause := range strings.Split(line, ": ") {
		if seen[clause] {
			t.Errorf("locker %.80q: %q says %q twice", args, line, clause)
		}
		seen[clause] = true
	}
}
