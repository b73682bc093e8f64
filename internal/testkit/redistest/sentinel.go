package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SentinelMasterName is the name under which a sentinel started by
// StartSentinel monitors its master.
const SentinelMasterName = "locker-test"

// Sentinel is a redis-server in sentinel mode watching one master, started for a test.
//
// It monitors the master as MasterName with quorum 1, down-after-milliseconds
// 1000 and failover-timeout 5000. Its methods are safe for concurrent use.
type Sentinel struct {
	// Addr is "127.0.0.1:port", the address the sentinel listens on.
	Addr string
	// Port is the TCP port of Addr.
	Port int
	// Dir is the sentinel's working directory (a t.TempDir): sentinel.conf,
	// which the sentinel rewrites as it learns, redis.log and redis.out.
	Dir string
	// MasterName is the name of the monitored master: "locker-test".
	MasterName string
	// Master is the monitored server.
	Master *Server

	srv *Server // the process, started and stopped like any server's
}

// sentinelConfig is the part of a config that makes a sentinel.
type sentinelConfig struct {
	masterName string
	masterPort int
}

// StartSentinel starts a redis-server in sentinel mode (redis-server
// sentinel.conf --sentinel) monitoring master as "locker-test", and returns
// once the sentinel answers PING and SENTINEL GET-MASTER-ADDR-BY-NAME
// locker-test with master's address. Like StartServer, it picks a free
// 127.0.0.1 port (retrying with a new one if it is taken first), runs the
// process in its own process group with a parent-death signal on Linux, kills
// and reaps it in t.Cleanup, skips or fails the test as Require does when
// redis-server is missing, and fails it, with the tail of the log, if the
// sentinel does not answer PING within 10 seconds or does not report the
// master within 10 more.
func StartSentinel(t testing.TB, master *Server) *Sentinel {
	t.Helper()
	if !require(t) {
		return nil
	}
	if master == nil {
		t.Fatalf("redistest: StartSentinel needs a master server, got nil")
		return nil
	}
	srv := startServer(t, config{sentinel: &sentinelConfig{masterName: SentinelMasterName, masterPort: master.Port}})
	if srv == nil {
		return nil
	}
	s := &Sentinel{Addr: srv.Addr, Port: srv.Port, Dir: srv.Dir, MasterName: SentinelMasterName, Master: master, srv: srv}
	deadline := time.Now().Add(readyTimeout)
	for {
		addr, err := s.masterAddr()
		if err == nil && addr == master.Addr {
			return s
		}
		if err == nil {
			err = fmt.Errorf("reports master %q, want %q", addr, master.Addr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel %s does not report master %s within %v: %v\n%s",
				s.Addr, master.Addr, readyTimeout, err, srv.logTail(0, 0))
			return nil
		}
		time.Sleep(pollInterval)
	}
}

// masterAddr asks the sentinel for its master's address, "ip:port".
func (s *Sentinel) masterAddr() (string, error) {
	v, err := Do(s.Addr, pingTimeout, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
	if err != nil {
		return "", err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME replied %#v", v)
	}
	ip, _ := a[0].(string)
	port, _ := a[1].(string)
	if ip == "" || port == "" {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME replied %#v", v)
	}
	return ip + ":" + port, nil
}

// Stop kills the sentinel with SIGKILL and waits until it has been reaped
// (see Server.Stop). Idempotent.
func (s *Sentinel) Stop() { s.srv.Stop() }

// PID returns the process id of the running sentinel, or 0 when stopped.
func (s *Sentinel) PID() int { return s.srv.PID() }

// Do sends one command to the sentinel and returns the reply; it fails the
// test on any error (see Server.Do).
func (s *Sentinel) Do(t testing.TB, args ...string) any {
	t.Helper()
	return s.srv.Do(t, args...)
}

func (s *Server) sentinelConfPath() string { return filepath.Join(s.Dir, "sentinel.conf") }

// writeSentinelConf writes sentinel.conf for the server's port, unless it
// exists: a restarted sentinel keeps what it rewrote there (its id, epochs,
// the master it learned of). A start on a new port removes it first.
func (s *Server) writeSentinelConf() error {
	path := s.sentinelConfPath()
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	sc := s.cfg.sentinel
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n", s.Port, strconv.Quote(s.Dir)) +
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n", sc.masterName, sc.masterPort) +
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000\n", sc.masterName) +
		fmt.Sprintf("sentinel failover-timeout %s 5000\n", sc.masterName)
	return os.WriteFile(path, []byte(conf), 0o644)
}
