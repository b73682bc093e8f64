//go:build linux

package history

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const clockChildEnv = "HISTORY_CLOCK_CHILD"

// TestClockChild prints one reading of Now; TestClockAcrossProcesses runs it.
func TestClockChild(t *testing.T) {
	if os.Getenv(clockChildEnv) != "1" {
		t.Skip("run by TestClockAcrossProcesses in a child process")
	}
	os.Stdout.WriteString("\nNOW " + strconv.FormatInt(Now(), 10) + "\n")
}

// Readings of Now in another process fall between this process's readings before it started
// and after it ended: the clock is shared, so histories of processes merge.
func TestClockAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestClockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), clockChildEnv+"=1")
	before := Now()
	out, err := cmd.Output()
	after := Now()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "\nNOW ")
	child, err := strconv.ParseInt(strings.Fields(rest + " x")[0], 10, 64)
	if !ok || err != nil {
		t.Fatalf("the child printed no reading: %q", out)
	}
	if child < before || child > after {
		t.Fatalf("the child read %d, outside this process's %d..%d", child, before, after)
	}
	if a, b := Now(), Now(); b < a {
		t.Fatalf("Now went back from %d to %d", a, b)
	}
}
