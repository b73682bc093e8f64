//go:build unix

package backend_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// boundDrivers are the drivers, plus go-redis as most people create it: without
// ContextTimeoutEnabled, where it ignores contexts while it waits for a reply.
var boundDrivers = append(append([]driver{}, drivers...), driver{"goredis-plain", func(t conformance.TB, addr string, opts ...rediscore.Option) locker.Locker {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return goredis.New(rdb, opts...)
}})

// callSlack is how late a call may return after its ctx ended or its Client closed: a goroutine
// switch and a timer on a loaded machine, far below any driver's I/O timeout (3 s and more), which
// is what a call took before it was bounded.
const callSlack = time.Second

// stopServer starts a redis-server, runs before on it (to take a lock, say), then stops it with
// SIGSTOP: its connections stay open and no reply ever comes, until the test ends.
func stopServer(t *testing.T, before func(addr string)) {
	t.Helper()
	srv := redistest.StartServer(t)
	before(srv.Addr)
	if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(srv.PID(), syscall.SIGCONT) })
}

// Against a server that stopped answering, a call in flight ends soon after its ctx is
// cancelled (a ctx without deadline, which the drivers' I/O timeouts used to outlast) and soon
// after its Client is closed (ErrClosed), for Lock, TryLock, Inspect and ForceUnlock, on every
// driver.
func TestCallsInFlightEndAtCtxAndClose(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, c *locker.Client) error
	}{
		{"Lock", func(ctx context.Context, c *locker.Client) error { _, err := c.Lock(ctx, "bound:k"); return err }},
		{"TryLock", func(ctx context.Context, c *locker.Client) error { _, err := c.TryLock(ctx, "bound:k"); return err }},
		{"Inspect", func(ctx context.Context, c *locker.Client) error { _, err := c.Inspect(ctx, "bound:k"); return err }},
		{"ForceUnlock", func(ctx context.Context, c *locker.Client) error { _, err := c.ForceUnlock(ctx, "bound:k"); return err }},
	}
	for _, d := range boundDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			var cancelled, closed []*locker.Client
			stopServer(t, func(addr string) {
				for range calls {
					for _, list := range []*[]*locker.Client{&cancelled, &closed} {
						c := locker.New(d.new(t, addr))
						t.Cleanup(func() { _ = c.Close() })
						// A first call opens the connection, so the ones below wait for a reply.
						if _, err := c.Inspect(context.Background(), "bound:warm"); err != nil {
							t.Fatal(err)
						}
						*list = append(*list, c)
					}
				}
			})
			type outcome struct {
				err  error
				took time.Duration
			}
			const after = 200 * time.Millisecond
			results := make(chan outcome, 2*len(calls))
			for i, call := range calls {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() {
					start := time.Now()
					err := call.call(ctx, cancelled[i])
					results <- outcome{err, time.Since(start)}
				}()
				time.AfterFunc(after, cancel)
				c := closed[i]
				go func() {
					start := time.Now()
					err := call.call(context.Background(), c)
					results <- outcome{err, time.Since(start)}
				}()
				time.AfterFunc(after, func() { _ = c.Close() })
			}
			deadline := time.After(after + 10*callSlack)
			var latest time.Duration
			defer func() { t.Logf("the latest call returned %v after its ctx or Client ended", latest) }()
			for range 2 * len(calls) {
				select {
				case r := <-results:
					latest = max(latest, r.took-after)
					if r.err == nil {
						t.Errorf("a call on a stopped server succeeded")
					} else if !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, locker.ErrClosed) {
						t.Errorf("error %v, want one wrapping context.Canceled or ErrClosed", r.err)
					}
					if r.took > after+callSlack {
						t.Errorf("a call returned %v after its ctx was cancelled or its Client closed (%v): %v", r.took-after, r.took, r.err)
					}
				case <-deadline:
					t.Fatalf("calls still running %v after their ctx was cancelled or their Client closed", 10*callSlack)
				}
			}
		})
	}
}

// Unlock against a server that granted the lock and then stopped answering returns within
// WithUnlockTimeout, and within the default bound without it, on every driver (including the
// drivers' own retries); Close does not wait for it.
func TestUnlockBounded(t *testing.T) {
	for _, d := range boundDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			const short = 300 * time.Millisecond
			var leases []*locker.Lease
			bounds := []time.Duration{short, locker.DefaultUnlockTimeout}
			stopServer(t, func(addr string) {
				b := d.new(t, addr)
				for i, bound := range bounds {
					opts := []locker.Option{}
					if bound != locker.DefaultUnlockTimeout {
						opts = append(opts, locker.WithUnlockTimeout(bound))
					}
					c := locker.New(b, opts...)
					t.Cleanup(func() { _ = c.Close() })
					l, err := c.Lock(context.Background(), "bound:unlock:"+string(rune('a'+i)))
					if err != nil {
						t.Fatal(err)
					}
					leases = append(leases, l)
				}
			})
			errs := make(chan error, len(leases))
			for i, l := range leases {
				go func() {
					start := time.Now()
					err := l.Unlock()
					if took := time.Since(start); took > bounds[i]+callSlack {
						err = errors.Join(err, errors.New("too late"))
						t.Errorf("Unlock bounded by %v took %v", bounds[i], took)
					}
					errs <- err
				}()
			}
			for range leases {
				if err := <-errs; err == nil || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Unlock on a stopped server: %v, want an error wrapping context.DeadlineExceeded", err)
				}
			}
		})
	}
}
