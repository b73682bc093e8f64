// Package pgtest starts real PostgreSQL servers for tests: initdb into a temp directory, then
// postgres on a free 127.0.0.1 port, as redistest does for redis-server.
//
// Shared returns one server per test binary, started at its first call and stopped by Main (a
// TestMain's) or, failing that, with the binary (the server gets a parent-death signal). Start
// returns a server of the test's own, killed in t.Cleanup, for tests that stop or restart it.
// Tests separate their data on a shared server with a schema each (Schema).
//
// When initdb or postgres is missing (neither on PATH nor under /usr/lib/postgresql/*/bin, where
// Debian puts them), the tests skip, or fail when LOCKER_REQUIRE_POSTGRES is "1" (CI). Run as
// root, the server runs as the user postgres (or nobody), since PostgreSQL refuses root.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RequireEnv is the environment variable that, set to "1", turns a skip for missing binaries
// into a failure.
const RequireEnv = "LOCKER_REQUIRE_POSTGRES"

const (
	readyTimeout  = 20 * time.Second
	stopTimeout   = 10 * time.Second
	startAttempts = 5
)

// Binary returns the path of a PostgreSQL program (initdb, postgres), or "" when there is none:
// on PATH, else the newest /usr/lib/postgresql/N/bin.
func Binary(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if p := filepath.Join(d, name); executable(p) {
			return p
		}
	}
	return ""
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Require skips t when initdb or postgres is missing, or fails it when LOCKER_REQUIRE_POSTGRES
// is "1". It reports whether they were found.
func Require(t testing.TB) bool {
	t.Helper()
	if Binary("initdb") != "" && Binary("postgres") != "" {
		return true
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("pgtest: %s=1 but initdb or postgres not found on PATH or under /usr/lib/postgresql/*/bin; install them (apt-get install postgresql)", RequireEnv)
		return false
	}
	t.Skipf("pgtest: initdb or postgres not found on PATH or under /usr/lib/postgresql/*/bin; install them (apt-get install postgresql), or set %s=1 to fail instead — skipping", RequireEnv)
	return false
}

// Server is one postgres process (and its data directory) started for tests. Its address and
// directory never change, also across Stop and Restart.
type Server struct {
	Addr string // "127.0.0.1:port"
	Port int
	Dir  string // the data directory is Dir/data; the server's log is Dir/postgres.log

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	cred *syscall.Credential
}

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
	schemas    atomic.Int64
)

// Shared returns the test binary's shared server, starting it at the first call (skipping or
// failing t as Require does when the binaries are missing).
func Shared(t testing.TB) *Server {
	t.Helper()
	if !Require(t) {
		return nil
	}
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pgtest-")
		if err != nil {
			sharedErr = err
			return
		}
		shared, sharedErr = launch(dir)
	})
	if sharedErr != nil {
		t.Fatalf("pgtest: start the shared server: %v", sharedErr)
	}
	return shared
}

// Main runs m and then stops the shared server, if one was started, and removes its directory:
// call it from TestMain (os.Exit(pgtest.Main(m))).
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.stop(syscall.SIGQUIT)
		os.RemoveAll(shared.Dir)
	}
	return code
}

// Start starts a server of t's own, killed and removed in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	if !Require(t) {
		return nil
	}
	s, err := launch(t.TempDir())
	if err != nil {
		t.Fatalf("pgtest: start: %v", err)
	}
	t.Cleanup(func() { s.stop(syscall.SIGQUIT) })
	return s
}

// URL is the server's connection string, for database postgres as user postgres.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr)
}

// Pool returns a pool on the server, closed in t.Cleanup. extra is appended to the URL's query
// ("pool_max_conns=4", say).
func (s *Server) Pool(t testing.TB, extra ...string) *pgxpool.Pool {
	t.Helper()
	url := s.URL()
	for _, e := range extra {
		url += "&" + e
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Schema creates a schema of a name no other call of this process gets, and returns its name.
func (s *Server) Schema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	s.exec(t, "create schema "+name)
	return name
}

// exec runs sql on a connection of its own.
func (s *Server) exec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	conn, err := pgconn.Connect(ctx, s.URL())
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// Stop stops the server at once (SIGQUIT: an immediate shutdown, recovered from at the next
// start, as after a crash) and waits until it has exited.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.stop(syscall.SIGQUIT); err != nil {
		t.Fatalf("pgtest: stop: %v", err)
	}
}

// Restart starts the server again after Stop, on the same port and data, and waits until it
// accepts connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
}

// launch initialises a data directory under dir and starts a server on it.
func launch(dir string) (*Server, error) {
	s := &Server{Dir: dir}
	if err := s.initdb(); err != nil {
		return nil, err
	}
	var err error
	for range startAttempts {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// initdb makes Dir/data, owned by the user the server runs as.
func (s *Server) initdb() error {
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return err
		}
		s.cred = cred
		// The user must reach the data directory: open the way down to it.
		for d := s.Dir; d != "/" && d != "." && strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
			if d == os.TempDir() {
				break
			}
			os.Chmod(d, 0o755)
		}
		if err := os.Chown(s.Dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.Command(Binary("initdb"), "-D", filepath.Join(s.Dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	return nil
}

// unprivileged is the user a server started by root runs as: postgres, else nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("run as root and no user postgres or nobody to run the server as")
}

// start starts postgres on s's port and data, and waits until it accepts connections.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(Binary("postgres"), "-D", filepath.Join(s.Dir, "data"), "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300",
		"-c", "shared_buffers=32MB", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // its exit is seen through done
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgconn.Connect(ctx, s.URL())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("postgres exited: %v; log: %s", err, tail(filepath.Join(s.Dir, "postgres.log")))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("postgres not ready in %v: %v; log: %s", readyTimeout, err, tail(filepath.Join(s.Dir, "postgres.log")))
		}
	}
}

// stop sends sig to the server and waits until it has exited, killing it after stopTimeout.
func (s *Server) stop(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		s.kill()
	}
	s.cmd = nil
	return nil
}

// kill kills the server's process group and waits for it (s.mu held).
func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// freePort returns a TCP port free on 127.0.0.1 just now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of the file at path.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}
