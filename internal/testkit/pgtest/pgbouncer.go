package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// PgBouncer starts pgbouncer in front of s in transaction mode, with at most poolSize server
// connections (so that client connections share them, statement by statement), on a free
// 127.0.0.1 port; it is killed in t.Cleanup. It returns the address clients connect to, for the
// database postgres as user postgres. The test skips when pgbouncer is not installed (apt-get
// install pgbouncer).
func (s *Server) PgBouncer(t testing.TB, poolSize int) string {
	t.Helper()
	bin := Binary("pgbouncer")
	if bin == "" && executable("/usr/sbin/pgbouncer") {
		bin = "/usr/sbin/pgbouncer"
	}
	if bin == "" {
		t.Skip("pgtest: pgbouncer not found on PATH or at /usr/sbin/pgbouncer; install it (apt-get install pgbouncer) — skipping")
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ini := fmt.Sprintf(`[databases]
postgres = host=127.0.0.1 port=%d dbname=postgres user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = %s
`, s.Port, port, filepath.Join(dir, "users.txt"), poolSize, filepath.Join(dir, "pgbouncer.log"))
	for name, text := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n", "pgbouncer.log": ""} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o666)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.cred == nil && os.Geteuid() == 0 { // pgbouncer refuses root too
		if cred, err := unprivileged(); err == nil {
			cmd.SysProcAttr.Credential = cred
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgtest: pgbouncer: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // seen through done
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)
	for deadline := time.Now().Add(readyTimeout); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgconn.Connect(ctx, url)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return addr
		}
		select {
		case <-done:
			t.Fatalf("pgtest: pgbouncer exited: %v; log: %s", err, tail(filepath.Join(dir, "pgbouncer.log")))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: pgbouncer not ready: %v; log: %s", err, tail(filepath.Join(dir, "pgbouncer.log")))
		}
	}
}
