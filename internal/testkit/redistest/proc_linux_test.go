//go:build linux

package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// checkGone fails the test unless pid no longer exists: killed and reaped, so
// not even a zombie (signal 0 reports ESRCH).
func checkGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("checkGone: bad pid %d", pid)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after cleanup (kill -0: %v)", pid, err)
	}
}

const helperEnv = "REDISTEST_HELPER_KILL_SELF"

// TestHelperKillsItself is run as a child process by
// TestServerDiesWithTestProcess: it starts a server, prints its PID and
// SIGKILLs itself, so no cleanup runs.
func TestHelperKillsItself(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestServerDiesWithTestProcess")
	}
	s := StartServer(t)
	fmt.Printf("\nREDIS_PID %d\n", s.PID())
	_ = os.Stdout.Sync()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(10 * time.Second)
}

// TestServerDiesWithTestProcess checks the parent-death signal: a server
// outlives no test binary, even one killed with no chance to clean up.
func TestServerDiesWithTestProcess(t *testing.T) {
	t.Parallel()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperKillsItself$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper: err = %v, want killed by SIGKILL; output:\n%s", err, out)
	}
	pid := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "REDIS_PID "); ok {
			fmt.Sscan(rest, &pid)
		}
	}
	if pid <= 0 {
		t.Fatalf("helper printed no REDIS_PID; output:\n%s", out)
	}
	// The orphan is reaped by init (or a subreaper), which may be slow or
	// absent in a container: a zombie counts as dead.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) || isZombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // do not leak it
			t.Fatalf("redis-server %d still running 5s after its test process was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
