package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStartServerPing(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") || s.Addr != "127.0.0.1:"+strconv.Itoa(s.Port) {
		t.Fatalf("Addr = %q, Port = %d", s.Addr, s.Port)
	}
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %#v, want PONG", got)
	}
	// Defaults: no persistence, DEBUG allowed.
	if got := s.Do(t, "CONFIG", "GET", "appendonly"); !reflect.DeepEqual(got, []any{"appendonly", "no"}) {
		t.Errorf("CONFIG GET appendonly = %#v", got)
	}
	if got := s.Do(t, "CONFIG", "GET", "save"); !reflect.DeepEqual(got, []any{"save", ""}) {
		t.Errorf("CONFIG GET save = %#v", got)
	}
	if got := s.Do(t, "DEBUG", "SLEEP", "0"); got != "OK" {
		t.Errorf("DEBUG SLEEP 0 = %#v", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "redis.log")); err != nil {
		t.Errorf("log file: %v", err)
	}
}

func TestDo(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	for _, c := range []struct {
		args []string
		want any
	}{
		{[]string{"SET", "k", "v\r\nwith crlf"}, "OK"},
		{[]string{"GET", "k"}, "v\r\nwith crlf"},
		{[]string{"GET", "missing"}, nil},
		{[]string{"INCR", "n"}, int64(1)},
		{[]string{"RPUSH", "l", "a", "", "c"}, int64(3)},
		{[]string{"LRANGE", "l", "0", "-1"}, []any{"a", "", "c"}},
		{[]string{"LRANGE", "missing", "0", "-1"}, []any{}},
		{[]string{"PTTL", "k"}, int64(-1)},
	} {
		got, err := Do(s.Addr, time.Second, c.args...)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Do(%q) = %#v, %v; want %#v", c.args, got, err, c.want)
		}
	}
	_, err := Do(s.Addr, 0, "NOSUCHCOMMAND")
	var rerr Error
	if !errors.As(err, &rerr) || !strings.HasPrefix(string(rerr), "ERR unknown command") {
		t.Errorf("unknown command: err = %v (%T), want an Error reply", err, err)
	}
	if _, err := Do(s.Addr, time.Second); err == nil {
		t.Error("Do with no command: want an error")
	}
}

func TestReadReply(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want any
	}{
		{"+OK\r\n", "OK"},
		{"+\r\n", ""},
		{"-ERR bad\r\n", Error("ERR bad")},
		{":-42\r\n", int64(-42)},
		{"$0\r\n\r\n", ""},
		{"$-1\r\n", nil},
		{"*-1\r\n", nil},
		{"*3\r\n:1\r\n*2\r\n$1\r\na\r\n-MOVED 1 x:1\r\n$-1\r\n", []any{int64(1), []any{"a", Error("MOVED 1 x:1")}, nil}},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(c.in)), 0)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("readReply(%q) = %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "+OK", "+OK\n", ":x\r\n", "$5\r\nab\r\n", "$2\r\nabcd", "$-2\r\n", "*2\r\n:1\r\n", "%1\r\n", strings.Repeat("*1\r\n", 40) + ":1\r\n"} {
		if got, err := readReply(bufio.NewReader(strings.NewReader(in)), 0); err == nil {
			t.Errorf("readReply(%q) = %#v, want an error", in, got)
		}
	}
	if got, want := string(encodeCommand([]string{"SET", "k", ""})), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"; got != want {
		t.Errorf("encodeCommand = %q, want %q", got, want)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := StartServer(t, WithArgs("--maxmemory", "1mb"), WithArgs("--maxmemory", "2mb"))
	if got := s.Do(t, "CONFIG", "GET", "maxmemory"); !reflect.DeepEqual(got, []any{"maxmemory", "2097152"}) {
		t.Fatalf("CONFIG GET maxmemory = %#v, want 2mb (later args win)", got)
	}
}

func TestStopRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	addr, pid := s.Addr, s.PID()
	s.Do(t, "SET", "k", "v")
	s.Stop()
	s.Stop() // idempotent
	if s.PID() != 0 {
		t.Fatalf("PID after Stop = %d, want 0", s.PID())
	}
	checkGone(t, pid)
	if _, err := Do(addr, time.Second, "PING"); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
	s.Restart(t)
	if s.Addr != addr {
		t.Fatalf("Addr after Restart = %q, want %q", s.Addr, addr)
	}
	if p := s.PID(); p == 0 || p == pid {
		t.Fatalf("PID after Restart = %d (before: %d)", p, pid)
	}
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING after Restart = %#v", got)
	}
	if got := s.Do(t, "GET", "k"); got != nil {
		t.Fatalf("GET k after kill -9 and Restart without AOF = %#v, want nil", got)
	}
	// Restart of a running server stops it first.
	pid = s.PID()
	s.Restart(t)
	checkGone(t, pid)
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING after second Restart = %#v", got)
	}
}

func TestRestartWithAOFKeepsData(t *testing.T) {
	t.Parallel()
	s := StartServer(t, WithAOF())
	s.Do(t, "SET", "k", "v")
	s.Do(t, "PEXPIRE", "k", "600000")
	s.Stop() // SIGKILL: only what appendfsync always wrote survives
	s.Restart(t)
	if got := s.Do(t, "GET", "k"); got != "v" {
		t.Fatalf("GET k after kill -9 and Restart with AOF = %#v, want \"v\"", got)
	}
	if ttl, _ := s.Do(t, "PTTL", "k").(int64); ttl <= 0 || ttl > 600000 {
		t.Fatalf("PTTL k after Restart = %d", ttl)
	}
}

func TestCleanupKillsServer(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Run("inner", func(t *testing.T) {
		s := StartServer(t)
		pids = append(pids, s.PID())
		s.Restart(t) // the restarted process is the one cleanup must kill
		pids = append(pids, s.PID())
	})
	for _, pid := range pids {
		checkGone(t, pid)
	}
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Run("cluster", func(t *testing.T) {
		start := time.Now()
		c := StartCluster(t, 3)
		t.Logf("cluster of 3 ready in %v", time.Since(start).Round(time.Millisecond))
		if len(c.Addrs) != 3 || len(c.Nodes) != 3 {
			t.Fatalf("Addrs = %v, %d nodes", c.Addrs, len(c.Nodes))
		}
		want := map[string]bool{}
		for i, n := range c.Nodes {
			pids = append(pids, n.PID())
			if c.Addrs[i] != n.Addr {
				t.Errorf("Addrs[%d] = %s, node Addr %s", i, c.Addrs[i], n.Addr)
			}
			want[n.Addr] = true
		}
		if len(want) != 3 {
			t.Fatalf("node addresses not distinct: %v", c.Addrs)
		}
		var owners map[string]bool
		for _, n := range c.Nodes {
			info, _ := n.Do(t, "CLUSTER", "INFO").(string)
			if st := infoField(info, "cluster_state"); st != "ok" {
				t.Errorf("%s: cluster_state:%s", n.Addr, st)
			}
			if st := infoField(info, "cluster_slots_assigned"); st != "16384" {
				t.Errorf("%s: cluster_slots_assigned:%s", n.Addr, st)
			}
			ranges, err := clusterSlots(n.Addr)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkCoverage(ranges, 3); err != nil {
				t.Errorf("%s: %v", n.Addr, err)
			}
			owners = map[string]bool{}
			for _, r := range ranges {
				owners[r.Addr] = true
			}
			if !reflect.DeepEqual(owners, want) {
				t.Errorf("%s: slot owners %v, want the nodes %v", n.Addr, owners, c.Addrs)
			}
		}

		// A key sent to a node that does not own its slot is redirected.
		const key = "some-key"
		slot, _ := c.Nodes[0].Do(t, "CLUSTER", "KEYSLOT", key).(int64)
		owner := int(slot) * 3 / NumSlots // node i serves the i-th third
		wrong := c.Nodes[(owner+1)%3]
		_, err := Do(wrong.Addr, time.Second, "SET", key, "v")
		var rerr Error
		if wantMsg := fmt.Sprintf("MOVED %d %s", slot, c.Addrs[owner]); !errors.As(err, &rerr) || string(rerr) != wantMsg {
			t.Errorf("SET on the wrong node: err = %v, want %q", err, wantMsg)
		}
		if got := c.Nodes[owner].Do(t, "SET", key, "v"); got != "OK" {
			t.Errorf("SET on the owner = %#v", got)
		}
	})
	for _, pid := range pids {
		checkGone(t, pid)
	}
}

func TestStartClusterRejectsTooFewMasters(t *testing.T) {
	t.Parallel()
	f := &fakeTB{TB: t}
	StartCluster(f, 2)
	if !strings.Contains(f.fatal, "at least 3 masters") {
		t.Fatalf("StartCluster(2): fatal = %q", f.fatal)
	}
}

// fakeTB records Skipf and Fatalf instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	if f.fatal == "" { // keep the first, as the real Fatalf would stop there
		f.fatal = fmt.Sprintf(format, args...)
	}
}

func TestRequire(t *testing.T) {
	// Not parallel: changes PATH and fallbackBinaries.
	if Binary() == "" {
		t.Skip("needs redis-server installed, to test both branches")
	}
	f := &fakeTB{TB: t}
	Require(f)
	if f.skipped != "" || f.fatal != "" {
		t.Fatalf("with redis-server installed: skipped %q, fatal %q", f.skipped, f.fatal)
	}

	t.Setenv("PATH", t.TempDir())
	saved := fallbackBinaries
	fallbackBinaries = []string{filepath.Join(t.TempDir(), "redis-server")}
	t.Cleanup(func() { fallbackBinaries = saved })
	if b := Binary(); b != "" {
		t.Fatalf("Binary() = %q with nothing installed", b)
	}

	t.Setenv(RequireEnv, "")
	f = &fakeTB{TB: t}
	Require(f)
	if !strings.Contains(f.skipped, "redis-server not found") || !strings.Contains(f.skipped, "skipping") || f.fatal != "" {
		t.Errorf("missing, %s unset: skipped %q, fatal %q", RequireEnv, f.skipped, f.fatal)
	}
	f = &fakeTB{TB: t}
	StartServer(f) // must stop at Require; with the fake it returns instead
	if f.skipped == "" {
		t.Errorf("StartServer did not call Require")
	}

	t.Setenv(RequireEnv, "1")
	f = &fakeTB{TB: t}
	Require(f)
	if !strings.Contains(f.fatal, "LOCKER_REQUIRE_REDIS=1 but redis-server not found") || f.skipped != "" {
		t.Errorf("missing, %s=1: skipped %q, fatal %q", RequireEnv, f.skipped, f.fatal)
	}
}

func TestPortTaken(t *testing.T) {
	// Not parallel: replaces pickPort.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	other := StartServer(t)

	// A port held by a plain listener: redis-server fails to bind and exits.
	s := &Server{Port: taken, Addr: l.Addr().String(), Dir: t.TempDir(), bin: Binary()}
	if err := s.launchLocked(); !errors.Is(err, errPortInUse) || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("launch on a listener's port: err = %v, want errPortInUse with the log", err)
	}
	// A port held by another redis-server: its PONG must not be taken for ours.
	s = &Server{Port: other.Port, Addr: other.Addr, Dir: t.TempDir(), bin: Binary()}
	if err := s.launchLocked(); !errors.Is(err, errPortInUse) {
		t.Errorf("launch on another server's port: err = %v, want errPortInUse", err)
	}
	if got := other.Do(t, "PING"); got != "PONG" {
		t.Errorf("other server after the clash: PING = %#v", got)
	}

	// StartServer retries with a fresh port when it loses the race.
	calls := 0
	pickPort = func(cluster bool) (int, error) {
		calls++
		if calls <= 2 {
			return taken, nil
		}
		return freePort(cluster)
	}
	t.Cleanup(func() { pickPort = freePort })
	s = StartServer(t)
	if calls != 3 || s.Port == taken {
		t.Errorf("StartServer: %d port picks, port %d (taken: %d)", calls, s.Port, taken)
	}
	pickPort = func(bool) (int, error) { return taken, nil }
	f := &fakeTB{TB: t}
	if s := StartServer(f); s != nil || !strings.Contains(f.fatal, "port already in use") {
		t.Errorf("StartServer with the port always taken: %v, fatal %q", s, f.fatal)
	}
	pickPort = freePort

	// Restart cannot change port: it fails the test if the port stays taken.
	s = StartServer(t)
	s.Stop()
	l2, err := net.Listen("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	f = &fakeTB{TB: t}
	s.Restart(f)
	if !strings.Contains(f.fatal, "port already in use") || s.PID() != 0 {
		t.Errorf("Restart on a taken port: fatal %q, PID %d", f.fatal, s.PID())
	}
}

func TestStartFailureReportsLog(t *testing.T) {
	t.Parallel()
	f := &fakeTB{TB: t}
	if s := StartServer(f, WithArgs("--no-such-directive", "x")); s != nil {
		t.Fatalf("StartServer with a bad argument returned %v", s)
	}
	for _, want := range []string{"exited before answering PING", "Bad directive", "redis.out"} {
		if !strings.Contains(f.fatal, want) {
			t.Errorf("fatal message lacks %q:\n%s", want, f.fatal)
		}
	}
	t.Logf("message:\n%s", f.fatal)
}
