package redistest

import (
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestStartSentinel(t *testing.T) {
	t.Parallel()
	var pid int
	t.Run("sentinel", func(t *testing.T) {
		m := StartServer(t)
		s := StartSentinel(t, m)
		pid = s.PID()
		if s.MasterName != "locker-test" || s.Master != m {
			t.Fatalf("MasterName %q, Master %v", s.MasterName, s.Master)
		}
		if s.Addr != net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) || s.Addr == m.Addr {
			t.Fatalf("Addr %q, Port %d (master %s)", s.Addr, s.Port, m.Addr)
		}
		host, port, _ := net.SplitHostPort(m.Addr)
		if got := s.Do(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "locker-test"); !reflect.DeepEqual(got, []any{host, port}) {
			t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME = %#v, want [%s %s]", got, host, port)
		}
		info, _ := s.Do(t, "INFO", "server").(string)
		if mode := infoField(info, "redis_mode"); mode != "sentinel" {
			t.Errorf("redis_mode:%s, want sentinel", mode)
		}
		if p := infoField(info, "process_id"); p != strconv.Itoa(pid) {
			t.Errorf("process_id:%s, want %d", p, pid)
		}
		// The sentinel rewrote its config file, which it needs writable.
		conf, err := os.ReadFile(s.srv.sentinelConfPath())
		if err != nil || !strings.Contains(string(conf), "sentinel myid") {
			t.Errorf("sentinel.conf not rewritten by the sentinel (err %v):\n%s", err, conf)
		}
		s.Stop()
		s.Stop() // idempotent
		if s.PID() != 0 {
			t.Errorf("PID after Stop = %d", s.PID())
		}
		checkGone(t, pid)
		s = StartSentinel(t, m) // killed by cleanup
		pid = s.PID()
	})
	checkGone(t, pid)
}

func TestStartSentinelNilMaster(t *testing.T) {
	t.Parallel()
	f := &fakeTB{TB: t}
	if s := StartSentinel(f, nil); s != nil || !strings.Contains(f.fatal, "needs a master") {
		t.Fatalf("StartSentinel(nil) = %v, fatal %q", s, f.fatal)
	}
}

func TestSentinelPortTaken(t *testing.T) {
	// Not parallel: replaces pickPort.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	m := StartServer(t)
	calls := 0
	pickPort = func(cluster bool) (int, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return freePort(cluster)
	}
	t.Cleanup(func() { pickPort = freePort })
	s := StartSentinel(t, m)
	if calls != 2 || s.Port == taken {
		t.Fatalf("StartSentinel: %d port picks, port %d (taken: %d)", calls, s.Port, taken)
	}
	// The config written for the taken port was replaced.
	conf, err := os.ReadFile(s.srv.sentinelConfPath())
	if err != nil || !strings.Contains(string(conf), "port "+strconv.Itoa(s.Port)+"\n") {
		t.Fatalf("sentinel.conf lacks port %d (err %v):\n%s", s.Port, err, conf)
	}
}
