package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/hashlock/locker"
)

// metrics collects what Clients report through their locker.Observer, for --metrics of run and
// bench, and prints a summary at exit. It keeps no key and no owner: only counts and durations.
type metrics struct {
	mu       sync.Mutex
	outcomes [locker.Failed + 1]int64
	wait     durations // every lock call's
	hold     durations // every Unlock's time held
	trips    durations // renewal round trips
	renewals [3]int64  // holds renewed, gone, failed
	lost     [locker.LostForced + 1]int64
}

// observer returns the Observer that feeds m.
func (m *metrics) observer() locker.Observer {
	return locker.Observer{
		Lock: func(_ context.Context, e locker.LockEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if e.Outcome <= locker.Failed {
				m.outcomes[e.Outcome]++
			}
			m.wait.add(e.Wait)
		},
		Unlock: func(_ context.Context, e locker.UnlockEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.hold.add(e.Held)
		},
		Renew: func(_ context.Context, e locker.RenewEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.trips.add(e.Duration)
			m.renewals[0] += int64(e.Renewed)
			m.renewals[1] += int64(e.Gone)
			m.renewals[2] += int64(e.Failed)
		},
		Lost: func(_ context.Context, e locker.LostEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if e.Cause <= locker.LostForced {
				m.lost[e.Cause]++
			}
		},
	}
}

// write prints the summary, as lines that start with "locker <command>: metrics:".
func (m *metrics) write(w io.Writer, command string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := "locker " + command + ": metrics: "
	var parts []string
	for o := locker.Acquired; o <= locker.Failed; o++ {
		if n := m.outcomes[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	calls := "none"
	if len(parts) > 0 {
		calls = strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "%slock calls: %d (%s); wait %s\n", prefix, m.wait.n, calls, m.wait.summary())
	fmt.Fprintf(w, "%sunlocks: %d; held %s\n", prefix, m.hold.n, m.hold.summary())
	fmt.Fprintf(w, "%srenewals: %d renewed, %d gone, %d failed, in %d round trips (%s)\n", prefix,
		m.renewals[0], m.renewals[1], m.renewals[2], m.trips.n, m.trips.summary())
	var lost int64
	parts = parts[:0]
	for c := locker.LostExpired; c <= locker.LostForced; c++ {
		lost += m.lost[c]
		if m.lost[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m.lost[c], c))
		}
	}
	if lost > 0 {
		fmt.Fprintf(w, "%slost leases: %d (%s)\n", prefix, lost, strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(w, "%slost leases: 0\n", prefix)
	}
}

// subBuckets is the number of buckets of durations per doubling: quantiles within 1/8 octave
// (about 9%) above the true value, in a fixed space whatever the number of samples.
const subBuckets = 8

// durations is a histogram of durations, log-scaled, with the exact count, sum and maximum.
type durations struct {
	n       int64
	sum     time.Duration
	max     time.Duration
	buckets [64 * subBuckets]int64 // bucket i: up to 2^((i+1)/subBuckets) ns
}

func (d *durations) add(v time.Duration) {
	d.n++
	d.sum += v
	d.max = max(d.max, v)
	i := 0
	if v > 1 {
		i = min(int(math.Log2(float64(v))*subBuckets), len(d.buckets)-1)
	}
	d.buckets[i]++
}

// quantile returns the upper bound of the bucket of the q-quantile (0 < q <= 1), at most max.
func (d *durations) quantile(q float64) time.Duration {
	rank := int64(math.Ceil(q * float64(d.n)))
	var seen int64
	for i, c := range d.buckets {
		if seen += c; seen >= rank && c > 0 {
			return min(time.Duration(math.Exp2(float64(i+1)/subBuckets)), d.max)
		}
	}
	return d.max
}

// summary returns "p50 X, p99 Y, max Z, mean W", or "-" without samples.
func (d *durations) summary() string {
	if d.n == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v, mean %v", round(d.quantile(0.5)), round(d.quantile(0.99)), round(d.max), round(d.sum/time.Duration(d.n)))
}

// round rounds d to 3 significant digits, for people.
func round(d time.Duration) time.Duration {
	for unit := time.Duration(1); unit < time.Hour; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Second)
}
