package locker_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// BenchmarkLockUnlock measures an uncontended Lock+Unlock on the memory backend: the Client's
// own cost, which the observer hook must not raise when it is unused (issue 15: at most one
// allocation and 2% of the time).
func BenchmarkLockUnlock(b *testing.B) {
	benchLockUnlock(b, locker.New(memory.New()))
}

func benchLockUnlock(b *testing.B, c *locker.Client) {
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		l, err := c.Lock(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the CPU time (user and system) of the process so far: on a shared machine, a
// steadier measure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLockUnlockObserved is BenchmarkLockUnlock with an Observer that counts: the cost of
// the hook when it is used.
func BenchmarkLockUnlockObserved(b *testing.B) {
	var n [4]int
	benchLockUnlock(b, locker.New(memory.New(), locker.WithObserver(locker.Observer{
		Lock:   func(context.Context, locker.LockEvent) { n[0]++ },
		Unlock: func(context.Context, locker.UnlockEvent) { n[1]++ },
		Renew:  func(context.Context, locker.RenewEvent) { n[2]++ },
		Lost:   func(context.Context, locker.LostEvent) { n[3]++ },
	})))
}
