//go:build unix

package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// locker run --metrics prints the summary at exit: one lock call and its unlock; a refusal; a
// lease lost (forced away) and found gone by a renewal.
func TestRunMetrics(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lib := libClient(t, url)

	tio := newIO("", false)
	tio.exec(t, 0, runArgs(url, "job", []string{"--metrics"}, child("exit", "0"))...)
	expectLines(t, tio.stderr.String(),
		"locker run: metrics: lock calls: 1 (1 acquired); wait p50 ",
		"locker run: metrics: unlocks: 1; held p50 ",
		"locker run: metrics: renewals: 0 renewed, 0 gone, 0 failed, in 0 round trips (-)",
		"locker run: metrics: lost leases: 0",
	)

	held := lockKey(t, lib, "job")
	tio = newIO("", false)
	tio.exec(t, 1, runArgs(url, "job", []string{"--metrics", "-n"}, child("exit", "0"))...)
	expectLines(t, tio.stderr.String(),
		"locker run: metrics: lock calls: 1 (1 not_obtained); wait p50 ",
		"locker run: metrics: unlocks: 0; held -",
		"locker run: metrics: lost leases: 0",
	)
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}

	tio = newIO("", false)
	code := goRun(tio, runArgs(url, "job", []string{"--metrics", "--ttl=300ms", "--grace=10s"}, child("signals")))
	readyPID(t, tio.stdout)
	if _, err := lib.ForceUnlock(context.Background(), "job"); err != nil {
		t.Fatal(err)
	}
	if c := exitCode(t, code); c != exitLockLost {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", c, exitLockLost, tio.stderr)
	}
	expectLines(t, tio.stderr.String(),
		"locker run: metrics: lock calls: 1 (1 acquired); wait p50 ",
		"locker run: metrics: renewals: ",
		"locker run: metrics: lost leases: 1 (1 ",
	)
	// The next renewal finds the lease gone; on a machine so loaded that it came 200ms late,
	// the lease expired first by the local clock.
	gone := strings.Contains(tio.stderr.String(), ", 1 gone, 0 failed, in ") && strings.Contains(tio.stderr.String(), "lost leases: 1 (1 gone)")
	if !gone && !strings.Contains(tio.stderr.String(), "lost leases: 1 (1 expired)") {
		t.Errorf("the lease was neither found gone by a renewal nor expired:\n%s", tio.stderr)
	}
}

// locker bench --metrics prints the summary of every Client's calls after its tables.
func TestBenchMetrics(t *testing.T) {
	tio := newIO("", false)
	tio.exec(t, 0, "bench", "--time", "20ms", "--driver", "memory", "--scenario", "uncontended,watchdog", "--leases", "20", "--lease-ttl", "30ms", "--metrics")
	out := tio.stderr.String()
	expectLines(t, out,
		"locker bench: metrics: lock calls: ",
		"locker bench: metrics: unlocks: ",
		"locker bench: metrics: renewals: ",
		"locker bench: metrics: lost leases: ",
	)
	if strings.Contains(out, "lock calls: 0 ") || strings.Contains(out, " 0 renewed") {
		t.Errorf("no lock calls or no renewals counted:\n%s", out)
	}
}

// expectLines fails the test unless every prefix starts a line of out.
func expectLines(t *testing.T, out string, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		if !strings.Contains("\n"+out, "\n"+p) {
			t.Errorf("no line starts with %q:\n%s", p, out)
		}
	}
}

// The summary's quantiles: within a bucket (1/8 octave) above the true value, never above the
// maximum.
func TestDurationsQuantile(t *testing.T) {
	var d durations
	for i := 1; i <= 100; i++ {
		d.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := d.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.095 {
			t.Errorf("quantile(%v) = %v, want %v (+9%%)", c.q, got, c.want)
		}
	}
	if d.max != 100*time.Millisecond || d.n != 100 {
		t.Errorf("max %v, n %d", d.max, d.n)
	}
	var empty durations
	if s := empty.summary(); s != "-" {
		t.Errorf("empty summary %q", s)
	}
}
