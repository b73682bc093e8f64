// Package redistest starts real redis-server processes for tests.
//
// Every server listens on a free 127.0.0.1 port, keeps its files in a
// directory from t.TempDir, and is killed (SIGKILL) and reaped in t.Cleanup.
// On Linux a server also runs in its own process group with a parent-death
// signal, so it dies with the test binary even if that panics or is killed.
//
// When redis-server is not installed, StartServer and StartCluster skip the
// test (see Require); set LOCKER_REQUIRE_REDIS=1 to make that a failure, for
// example in CI where the Redis-backed tests must not be silently skipped.
//
// StartSentinel starts a redis-server in sentinel mode watching one such
// server, with the same port, directory, process and cleanup handling.
//
// The package also has a minimal RESP client, Do and Server.Do, for tests
// that need to send a command directly (SCRIPT FLUSH, DEBUG SLEEP, PTTL...).
//
// Every wait in this package is bounded: a server (or sentinel) must answer
// PING within 10 seconds of being started, a sentinel must report its
// master's address within 10 more, and a cluster must be fully formed within 20.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv is the environment variable that, set to "1", turns the skip in
// Require into a test failure.
const RequireEnv = "LOCKER_REQUIRE_REDIS"

const (
	readyTimeout  = 10 * time.Second       // start until PONG
	pingTimeout   = 500 * time.Millisecond // one readiness probe
	pollInterval  = 20 * time.Millisecond
	killTimeout   = 10 * time.Second // SIGKILL until reaped
	startAttempts = 5                // tries with a fresh port when the port is taken
	logTailBytes  = 4 << 10
)

// fallbackBinaries are tried, in order, when redis-server is not on PATH.
var fallbackBinaries = []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"}

// Binary returns the path of the redis-server executable, or "" if there is
// none. It looks on PATH first, then at /usr/bin/redis-server and
// /usr/local/bin/redis-server. The result is not cached.
func Binary() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	for _, p := range fallbackBinaries {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// Require skips the test when redis-server is not installed (see Binary), or
// fails it instead when the environment variable LOCKER_REQUIRE_REDIS is "1".
// It does nothing when redis-server is found. StartServer and StartCluster
// call it first, so tests only need it to skip before other set-up.
func Require(t testing.TB) {
	t.Helper()
	require(t)
}

// require is Require, reporting whether redis-server was found (for callers
// given a testing.TB whose Skipf and Fatalf return).
func require(t testing.TB) bool {
	t.Helper()
	if Binary() != "" {
		return true
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("redistest: %s=1 but redis-server not found on PATH, at %s; install it (apt-get install redis-server)",
			RequireEnv, strings.Join(fallbackBinaries, " or "))
		return false
	}
	t.Skipf("redistest: redis-server not found on PATH, at %s; install it (apt-get install redis-server), or set %s=1 to fail instead — skipping",
		strings.Join(fallbackBinaries, " or "), RequireEnv)
	return false
}

// Option configures a server started by StartServer.
type Option func(*config)

type config struct {
	aof      bool
	args     []string
	cluster  bool
	sentinel *sentinelConfig // non-nil: run in sentinel mode (see StartSentinel)
}

// WithAOF enables the append-only file with "appendfsync always", so every
// acknowledged write is on disk and survives Stop (kill -9) and Restart.
// Without it (the default) the server has no persistence at all
// (save "", appendonly no): a restarted server starts empty.
func WithAOF() Option {
	return func(c *config) { c.aof = true }
}

// WithArgs appends extra redis-server command-line arguments, for example
// WithArgs("--maxmemory", "10mb"). They come after the package's defaults, so
// for single-valued settings they override them. Options accumulate.
func WithArgs(args ...string) Option {
	args = append([]string(nil), args...)
	return func(c *config) { c.args = append(c.args, args...) }
}

// Server is one redis-server process started for a test.
//
// Its address, port and directory never change, also across Restart. Its
// methods are safe for concurrent use.
type Server struct {
	// Addr is "127.0.0.1:port", the address the server listens on.
	Addr string
	// Port is the TCP port of Addr. A cluster node's bus uses Port+10000.
	Port int
	// Dir is the server's working directory (a t.TempDir): redis.log, the
	// server's stdout/stderr in redis.out, the AOF and nodes.conf live here.
	Dir string

	bin string
	cfg config

	mu     sync.Mutex
	proc   *process // nil while stopped
	closed bool     // the owning test's cleanup has run
}

// process is one run of redis-server; done is closed once it has been reaped.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // valid after done is closed
}

// StartServer starts a standalone redis-server and returns once it answers
// PING. The server listens on a free 127.0.0.1 port (a new one is tried, up to
// 5 times, if another process takes it first), has no persistence unless
// WithAOF is given, allows DEBUG (Redis 7+), and is killed and reaped in
// t.Cleanup. It skips or fails the test as Require does when redis-server is
// missing, and fails it, with the tail of the server log, if the server does
// not come up within 10 seconds.
func StartServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if !require(t) {
		return nil
	}
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return startServer(t, cfg)
}

func startServer(t testing.TB, cfg config) *Server {
	t.Helper()
	// TempDir first: cleanups run last-in first-out, so the process is killed
	// before its directory is removed.
	s := &Server{Dir: t.TempDir(), bin: Binary(), cfg: cfg}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		if err := s.stopLocked(); err != nil {
			t.Errorf("redistest: stop %s: %v", s.Addr, err)
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		var port int
		if port, err = pickPort(cfg.cluster); err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
			return nil
		}
		s.Port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = s.launchLocked(); err == nil {
			return s
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
		// nodes.conf may have been written before the bus port failed to bind;
		// sentinel.conf names the port that was taken.
		_ = os.Remove(filepath.Join(s.Dir, "nodes.conf"))
		_ = os.Remove(s.sentinelConfPath())
	}
	if errors.Is(err, errPortInUse) {
		t.Fatalf("redistest: start redis-server (%s, dir %s): the port was taken by another process on each of %d attempts; last: %v",
			s.bin, s.Dir, startAttempts, err)
		return nil
	}
	t.Fatalf("redistest: start redis-server (%s, dir %s): %v", s.bin, s.Dir, err)
	return nil
}

// Stop kills the server with SIGKILL (like kill -9: no shutdown, no final
// save) and waits until the process has been reaped. It is idempotent and
// safe to call on a stopped server; Restart starts it again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.stopLocked()
}

func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	return p.kill()
}

// Restart starts the server again on the same port, in the same directory,
// with the same configuration, and returns once it answers PING. With WithAOF
// the data written before Stop is loaded back; a cluster node keeps its
// nodes.conf (Restart does not wait for the cluster to be ok again). If the
// server is still running it is stopped first (SIGKILL). Restart fails the
// test if the port stays taken by another process, if the server does not
// come up within 10 seconds, or if the test that started it has finished.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		t.Fatalf("redistest: Restart of %s after the test that started it has finished", s.Addr)
		return
	}
	if err := s.stopLocked(); err != nil {
		t.Fatalf("redistest: restart %s: stop: %v", s.Addr, err)
		return
	}
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = s.launchLocked(); err == nil || !errors.Is(err, errPortInUse) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port cannot change; give it a moment
	}
	if err != nil {
		t.Fatalf("redistest: restart redis-server on %s (dir %s): %v", s.Addr, s.Dir, err)
	}
}

// PID returns the process id of the running redis-server, or 0 when stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Do sends one command to the server (see the package-level Do for the reply
// types) with DefaultTimeout and returns the reply. It fails the test on any
// error, including a Redis error reply; use the package-level Do to inspect
// error replies such as MOVED.
func (s *Server) Do(t testing.TB, args ...string) any {
	t.Helper()
	v, err := Do(s.Addr, DefaultTimeout, args...)
	if err != nil {
		t.Fatalf("redistest: %s %q: %v", s.Addr, args, err)
	}
	return v
}

func (s *Server) logPath() string { return filepath.Join(s.Dir, "redis.log") }
func (s *Server) outPath() string { return filepath.Join(s.Dir, "redis.out") }

func (s *Server) args() []string {
	if s.cfg.sentinel != nil {
		// Sentinel mode: the config file (port, bind, dir, monitor) must come first.
		a := []string{s.sentinelConfPath(), "--sentinel", "--daemonize", "no", "--logfile", s.logPath()}
		return append(a, s.cfg.args...)
	}
	a := []string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--logfile", s.logPath(),
	}
	if majorVersion(s.bin) >= 7 {
		a = append(a, "--enable-debug-command", "yes")
	}
	if s.cfg.aof {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	}
	if s.cfg.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		)
	}
	return append(a, s.cfg.args...)
}

// errPortInUse marks a start that failed because the port (or the cluster bus
// port) was taken by another process.
var errPortInUse = errors.New("port already in use")

// launchLocked starts redis-server and waits until it answers PING. On error
// the process has been killed and reaped.
func (s *Server) launchLocked() error {
	if s.cfg.sentinel != nil {
		if err := s.writeSentinelConf(); err != nil {
			return err
		}
	}
	logOff, outOff := fileSize(s.logPath()), fileSize(s.outPath())
	out, err := os.OpenFile(s.outPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out // a file, so no copying goroutine to wait for
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	out.Close()
	if err != nil {
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := s.waitReady(p, logOff, outOff); err != nil {
		if kerr := p.kill(); kerr != nil {
			err = fmt.Errorf("%w (and %v)", err, kerr)
		}
		return err
	}
	s.proc = p
	return nil
}

// waitReady polls PING until the server answers, it exits, or readyTimeout.
// A PONG only counts if INFO says it came from our process: if another server
// holds the port, ours is about to fail to bind.
func (s *Server) waitReady(p *process, logOff, outOff int64) error {
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for {
		select {
		case <-p.done:
			return s.exitError(p, logOff, outOff)
		default:
		}
		// Probe in a goroutine so that an exit is noticed at once even while
		// a probe hangs on a port that another program accepted but never
		// answers. A probe left behind ends by its own timeout.
		probe := make(chan probeResult, 1)
		addr := s.Addr // not s: the next start attempt may change it
		go func() {
			probe <- probeServer(addr)
		}()
		var r probeResult
		select {
		case <-p.done:
			return s.exitError(p, logOff, outOff)
		case r = <-probe:
		}
		if r.err == nil {
			if r.pid == p.cmd.Process.Pid {
				return nil
			}
			return fmt.Errorf("%w: %s is answered by process %d, not by ours (%d)", errPortInUse, s.Addr, r.pid, p.cmd.Process.Pid)
		}
		lastErr = r.err
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v (last error: %v)\n%s", readyTimeout, lastErr, s.logTail(logOff, outOff))
		}
		select {
		case <-p.done:
		case <-time.After(pollInterval):
		}
	}
}

type probeResult struct {
	pid int
	err error
}

// probeServer sends PING to addr and, on PONG, asks INFO for the answering
// server's PID.
func probeServer(addr string) probeResult {
	v, err := Do(addr, pingTimeout, "PING")
	if err != nil {
		return probeResult{err: err}
	}
	if v != "PONG" {
		return probeResult{err: fmt.Errorf("PING replied %q", v)}
	}
	pid, err := serverPID(addr)
	return probeResult{pid: pid, err: err}
}

func (s *Server) exitError(p *process, logOff, outOff int64) error {
	tail := s.logTail(logOff, outOff)
	err := fmt.Errorf("redis-server exited before answering PING (%v)\n%s", p.waitErr, tail)
	if strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// logTail returns what redis.log and redis.out gained since the offsets, at
// most logTailBytes of each.
func (s *Server) logTail(logOff, outOff int64) string {
	var b strings.Builder
	for _, f := range []struct {
		path string
		off  int64
	}{{s.logPath(), logOff}, {s.outPath(), outOff}} {
		data := readFrom(f.path, f.off)
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		if len(data) > logTailBytes {
			data = append([]byte("..."), data[len(data)-logTailBytes:]...)
		}
		fmt.Fprintf(&b, "--- %s ---\n%s\n", f.path, bytes.TrimRight(data, "\n"))
	}
	if b.Len() == 0 {
		return "(redis.log and redis.out are empty)"
	}
	return strings.TrimRight(b.String(), "\n")
}

// kill SIGKILLs the process (and its group on Linux) and waits until it has
// been reaped, for at most killTimeout.
func (p *process) kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	killProcess(p.cmd.Process)
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("process %d not reaped %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

// serverPID asks the server at addr for its process_id (INFO server).
func serverPID(addr string) (int, error) {
	v, err := Do(addr, pingTimeout, "INFO", "server")
	if err != nil {
		return 0, err
	}
	info, _ := v.(string)
	f := infoField(info, "process_id")
	pid, err := strconv.Atoi(f)
	if err != nil {
		return 0, fmt.Errorf("INFO server: no process_id in reply")
	}
	return pid, nil
}

// infoField returns the value of "key:value" in an INFO or CLUSTER INFO reply.
func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// pickPort is freePort; tests replace it to simulate losing a port race.
var pickPort = freePort

// freePort returns a port that was free on 127.0.0.1 a moment ago. For a
// cluster node the port is below 55535 and port+10000 (the bus) was free too.
func freePort(cluster bool) (int, error) {
	var lastErr error
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !cluster {
			l.Close()
			return port, nil
		}
		if port >= 65535-10000 {
			l.Close()
			lastErr = fmt.Errorf("port %d has no room for a bus port", port)
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		l.Close()
		if err != nil {
			lastErr = err
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no port with a free bus port after 50 tries: %v", lastErr)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func readFrom(path string, off int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	data, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return data
}

var (
	versionMu    sync.Mutex
	versionCache = map[string]int{}
	versionRE    = regexp.MustCompile(`v=(\d+)\.`)
)

// majorVersion returns the major version of the redis-server at bin, or 0 if
// it cannot be told; it runs "redis-server --version" once per path.
func majorVersion(bin string) int {
	versionMu.Lock()
	defer versionMu.Unlock()
	if v, ok := versionCache[bin]; ok {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.WaitDelay = time.Second
	out, _ := cmd.Output()
	v := 0
	if m := versionRE.FindSubmatch(out); m != nil {
		v, _ = strconv.Atoi(string(m[1]))
	}
	versionCache[bin] = v
	return v
}
