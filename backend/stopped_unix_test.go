//go:build unix

package backend_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A server that stops answering (SIGSTOP: connections stay open, replies never come) gives
// errors within the caller's ctx, and the holder's lease context ends before its lease could
// have expired on the server, for every driver.
func TestStoppedServer(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			const ttl = time.Second
			c := locker.New(d.new(t, srv.Addr), locker.WithTTL(ttl))
			defer c.Close()
			l, err := c.Lock(context.Background(), "stopped")
			if err != nil {
				t.Fatal(err)
			}
			acquired := time.Now()
			if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(srv.PID(), syscall.SIGCONT) })

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = c.TryLock(ctx, "other")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryLock on a stopped server = %v, want an error wrapping DeadlineExceeded", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("TryLock with a 300ms ctx took %v on a stopped server", took)
			}

			// The watchdog's timer and this one may both run late on a loaded machine: the
			// Client decided in time if the context ends within a slack after the expiry (the
			// exact bound is checked in synctest by the conformance suite).
			const slack = 250 * time.Millisecond
			select {
			case <-l.Context().Done():
			case <-time.After(time.Until(acquired.Add(ttl + slack))):
				t.Fatalf("the lease context was still live %v after the lease may have expired", slack)
			}
			if late := time.Since(acquired.Add(ttl)); late > 0 {
				t.Logf("the lease context ended %v after the lease may have expired (scheduling on a loaded machine)", late.Round(time.Millisecond))
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
				t.Fatalf("cause %v, want ErrLockLost", cause)
			}
		})
	}
}
