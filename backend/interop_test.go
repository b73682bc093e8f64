// Tests across the Redis backends: they speak one protocol (scripts, key and channel layout), so
// clients of different drivers share locks on one server; and each survives the server losing
// its script cache or its data.
package backend_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A driver makes a backend of one Redis driver on the server at addr, configured by opts.
type driver struct {
	name string
	new  func(t conformance.TB, addr string, opts ...rediscore.Option) locker.Locker
}

// drivers are the authDrivers (acl_test.go) on a server without authentication.
var drivers = func() []driver {
	var ds []driver
	for _, ad := range authDrivers {
		ds = append(ds, driver{ad.name, func(t conformance.TB, addr string, opts ...rediscore.Option) locker.Locker {
			l, err := ad.new(t, addr, "", "", opts...)
			if err != nil {
				t.Fatalf("%v", err)
			}
			return l
		}})
	}
	return ds
}()

// Workers of every driver, two Clients each, take turns on one key guarding a counter that only
// the lock protects.
func TestCrossDriverExclusion(t *testing.T) {
	srv := redistest.StartServer(t)
	const rounds = 60
	var (
		inside  atomic.Int32
		counter int
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	workers := 0
	for _, d := range drivers {
		b := d.new(t, srv.Addr)
		for range 2 {
			workers++
			c := locker.New(b, locker.WithTTL(5*time.Second))
			defer c.Close()
			wg.Go(func() {
				for range rounds {
					l, err := c.Lock(ctx, "interop:exclusion", locker.WithRetry(locker.LinearBackoff(100*time.Millisecond)))
					if err != nil {
						t.Errorf("%s: %v", d.name, err)
						return
					}
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d holders inside at once", n)
					}
					v := counter
					runtime.Gosched()
					counter = v + 1
					inside.Add(-1)
					if err := l.Unlock(); err != nil {
						t.Errorf("%s: %v", d.name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if counter != workers*rounds {
		t.Fatalf("counter %d after %d locked increments", counter, workers*rounds)
	}
}

// refusals is a backend that reports refused acquisitions, to know when a waiter waits.
type refusals struct {
	locker.Locker
	seen chan struct{}
}

func (r *refusals) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	a, err := r.Locker.Acquire(ctx, req)
	if err == nil && !a.Acquired() {
		r.seen <- struct{}{}
	}
	return a, err
}

// Each driver's release notice wakes a waiter of every other driver at once: the waiter's own
// timers are an hour (retry) and 30s (the holder's lease) away.
func TestCrossDriverNotices(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, holder := range drivers {
		for _, waiter := range drivers {
			if holder.name == waiter.name {
				continue
			}
			t.Run(holder.name+"->"+waiter.name, func(t *testing.T) {
				key := "interop:notice:" + holder.name + ":" + waiter.name
				h := locker.New(holder.new(t, srv.Addr), locker.WithTTL(30*time.Second))
				defer h.Close()
				w := &refusals{Locker: waiter.new(t, srv.Addr), seen: make(chan struct{}, 8)}
				wc := locker.New(w)
				defer wc.Close()
				held, err := h.Lock(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() {
					l, err := wc.Lock(ctx, key, locker.WithRetry(locker.LinearBackoff(time.Hour)))
					if err == nil {
						err = l.Unlock()
					}
					got <- err
				}()
				<-w.seen // refused before subscribing
				<-w.seen // refused after subscribing: now it waits
				released := time.Now()
				if err := held.Unlock(); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-got:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter was not woken by the release notice")
				}
				if d := time.Since(released); d > 2*time.Second {
					t.Fatalf("the waiter took %v after the release", d)
				}
			})
		}
	}
}

// After SCRIPT FLUSH every operation still works: each script falls back to EVAL (and the
// renewal pipeline reloads its script).
func TestScriptCacheLoss(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			b := d.new(t, srv.Addr)
			c := locker.New(b)
			defer c.Close()
			key, other := "flush:"+d.name, "flush:other:"+d.name
			step := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s after SCRIPT FLUSH: %v", what, err)
				}
				srv.Do(t, "SCRIPT", "FLUSH")
			}
			srv.Do(t, "SCRIPT", "FLUSH")
			outer, err := c.Lock(ctx, key)
			step("acquire", err)
			inner, err := c.Lock(outer.Context(), key)
			step("re-entry", err)
			for i, err := range b.Renew(ctx, []locker.Renewal{{Key: key, Owner: ownerOf(t, srv, key), TTL: time.Minute}}) {
				step("renew", errors.Join(err, errIf(i != 0, "extra result")))
			}
			st, err := c.Inspect(ctx, key)
			step("inspect", errors.Join(err, errIf(st.Holds != 2, "want 2 holds")))
			step("release", errors.Join(inner.Unlock(), outer.Unlock()))
			l, err := c.Lock(ctx, other)
			step("acquire", err)
			removed, err := c.ForceUnlock(ctx, other)
			step("force release", errors.Join(err, errIf(!removed, "nothing removed")))
			if !errors.Is(l.Unlock(), locker.ErrNotHeld) {
				t.Fatal("the forced lock was still held")
			}
		})
	}
}

// ownerOf reads the owner token of the single hold on key from the server.
func ownerOf(t *testing.T, srv *redistest.Server, key string) string {
	t.Helper()
	holds := holdsOn(t, srv, key)
	if len(holds) != 1 {
		t.Fatalf("the lock hash %s has owners %v, want one", key, holds)
	}
	for owner := range holds {
		return owner
	}
	return ""
}

func errIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}

// After a restart that lost the data, holders learn of the loss (their lease context ends with
// ErrLockLost) and locks work again with the reloaded scripts.
func TestServerRestartLosesLeases(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			c := locker.New(d.new(t, srv.Addr), locker.WithTTL(time.Second))
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := c.Lock(ctx, "restart")
			if err != nil {
				t.Fatal(err)
			}
			srv.Stop()
			srv.Restart(t)
			select {
			case <-l.Context().Done():
			case <-time.After(3 * time.Second):
				t.Fatal("the lease outlived the server's data by more than its TTL")
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
				t.Fatalf("cause %v, want ErrLockLost", cause)
			}
			// The first command on a connection broken by the restart may fail (rueidis does
			// not resend a script whose connection died): a caller tries again.
			var again *locker.Lease
			for try := 1; ; try++ {
				if again, err = c.Lock(ctx, "restart"); err == nil {
					break
				}
				if try == 3 {
					t.Fatalf("Lock after the restart, %d tries: %v", try, err)
				}
			}
			if err := again.Unlock(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Waiters of one key share one subscription (one connection, whatever their number), and the
// subscription ends when the last waiter leaves: nothing is left subscribed on the server.
func TestSubscriptionsShared(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			key := "shared:" + d.name
			channel := rediscore.Channel(key)
			b := d.new(t, srv.Addr)
			holder := locker.New(b, locker.WithTTL(30*time.Second))
			defer holder.Close()
			ctx := context.Background()
			held, err := holder.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Unlock()

			const waiters = 5
			wctx, stop := context.WithCancel(ctx)
			seen := &refusals{Locker: b, seen: make(chan struct{}, 2*waiters)}
			var wg sync.WaitGroup
			for range waiters {
				c := locker.New(seen)
				defer c.Close()
				wg.Go(func() {
					_, err := c.Lock(wctx, key, locker.WithRetry(locker.LinearBackoff(time.Hour)))
					if !errors.Is(err, context.Canceled) {
						t.Errorf("waiter: %v, want it cancelled", err)
					}
				})
			}
			for range 2 * waiters { // each waiter is refused before and after subscribing
				<-seen.seen
			}
			if n := subscribers(t, srv, channel); n != 1 {
				t.Fatalf("%d waiters hold %d subscriptions to %s, want 1", waiters, n, channel)
			}
			stop()
			wg.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for subscribers(t, srv, channel) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the subscription to %s outlived its waiters by 5s", channel)
				}
				time.Sleep(10 * time.Millisecond) // the server sees the unsubscription a moment later
			}
		})
	}
}

// subscribers returns how many connections subscribe to channel, sharded or not.
func subscribers(t *testing.T, srv *redistest.Server, channel string) int64 {
	t.Helper()
	n := int64(0)
	for _, cmd := range []string{"NUMSUB", "SHARDNUMSUB"} {
		r, _ := srv.Do(t, "PUBSUB", cmd, channel).([]any)
		if len(r) == 2 {
			c, _ := r[1].(int64)
			n += c
		}
	}
	return n
}

// A subscription survives a server restart for every driver: the Backend subscribes again on a
// new connection, waking its waiters, and notices flow again.
func TestSubscriptionSurvivesRestart(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			b := d.new(t, srv.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := "resubscribe:" + d.name
			notices, stop, err := b.Subscribe(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			srv.Restart(t)
			// Forced releases must be noticed again. The first commands may meet connections
			// the restart broke, the new subscription may take a moment, and its wake-up may
			// come first: wait until two forced releases in a row are each noticed.
			noticed := 0
			for noticed < 2 {
				_, _ = b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute})
				if removed, err := b.ForceRelease(ctx, key); err != nil || !removed {
					noticed = 0
					time.Sleep(10 * time.Millisecond) // the server is coming back
					continue
				}
				select {
				case <-notices:
					noticed++
				case <-time.After(time.Second):
					noticed = 0
				case <-ctx.Done():
					t.Fatal("forced releases went unnoticed for 30s after the restart")
				}
			}
		})
	}
}
