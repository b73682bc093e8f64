package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
)

var ctx = context.Background()

// result lets a test check a (value, error) call in one expression: of(f()).must(t).
type result[T any] struct {
	v   T
	err error
}

func of[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func wantState(t *testing.T, b *Backend, key string, want locker.State) {
	t.Helper()
	got := of(b.Inspect(ctx, key)).must(t)
	if want.Locked && want.Holders == nil {
		want.Holders = got.Holders // the tests below check the rest
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Inspect(%q) = %+v, want %+v", key, got, want)
	}
}

func TestExpiryAtExactlyTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		if a := of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: 10 * time.Millisecond})).must(t); a.Holds != 1 {
			t.Fatalf("Acquire = %+v", a)
		}
		time.Sleep(10*time.Millisecond - time.Nanosecond)
		wantState(t, b, "k", locker.State{Locked: true, Owner: "a", Holds: 1, TTL: time.Nanosecond})
		if a := of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "b", TTL: time.Second})).must(t); a != (locker.Acquisition{TTL: time.Nanosecond}) {
			t.Fatalf("refused Acquire = %+v", a)
		}
		time.Sleep(time.Nanosecond)
		wantState(t, b, "k", locker.State{})
		if _, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"}); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("Release after expiry: %v", err)
		}
		// The former owner starts afresh: not a re-entry.
		if a := of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t); a.Holds != 1 {
			t.Fatalf("Acquire after expiry = %+v", a)
		}
	})
}

func TestLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: 100 * time.Millisecond})).must(t)
		time.Sleep(40 * time.Millisecond)
		// Re-entry resets the lease to its own ttl.
		if a := of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: 50 * time.Millisecond})).must(t); a.Holds != 2 {
			t.Fatalf("re-entry = %+v", a)
		}
		wantState(t, b, "k", locker.State{Locked: true, Owner: "a", Holds: 2, TTL: 50 * time.Millisecond})
		time.Sleep(20 * time.Millisecond)
		// Release leaves the lease alone.
		if n := of(b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"})).must(t); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		wantState(t, b, "k", locker.State{Locked: true, Owner: "a", Holds: 1, TTL: 30 * time.Millisecond})
		if n := of(b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"})).must(t); n != 0 {
			t.Fatalf("Release = %d, want 0", n)
		}
		wantState(t, b, "k", locker.State{})
	})
}

func TestRoundTTL(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{1, time.Millisecond},
		{1200 * time.Microsecond, 2 * time.Millisecond},
		{2 * time.Millisecond, 2 * time.Millisecond},
		{2*time.Millisecond + 1, 3 * time.Millisecond},
		{math.MaxInt64, math.MaxInt64 - math.MaxInt64%time.Millisecond},
	} {
		if got := of(roundTTL("op", "k", c.in)).must(t); got != c.want {
			t.Errorf("roundTTL(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	b := New()
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: ttl}); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("Acquire ttl %v: %v", ttl, err)
		}
	}
	if errs := b.Renew(ctx, []locker.Renewal{{Key: "k", Owner: "a"}}); !errors.Is(errs[0], locker.ErrInvalid) {
		t.Errorf("Renew ttl 0: %v", errs[0])
	}
	wantState(t, b, "k", locker.State{})

	synctest.Test(t, func(t *testing.T) {
		b := New()
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: 1200 * time.Microsecond})).must(t)
		wantState(t, b, "k", locker.State{Locked: true, Owner: "a", Holds: 1, TTL: 2 * time.Millisecond})
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "big", Owner: "a", TTL: math.MaxInt64})).must(t)
	})
}

func TestRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "x", Owner: "a", TTL: 10 * time.Millisecond})).must(t)
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "y", Owner: "b", TTL: 10 * time.Millisecond})).must(t)
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "z", Owner: "a", TTL: 1 * time.Millisecond})).must(t)
		time.Sleep(5 * time.Millisecond)
		errs := b.Renew(ctx, []locker.Renewal{
			{Key: "x", Owner: "a", TTL: 30*time.Millisecond - 1}, // renewed, rounded up
			{Key: "y", Owner: "a", TTL: time.Hour},               // another owner's lock
			{Key: "z", Owner: "a", TTL: time.Hour},               // expired
			{Key: "w", Owner: "a", TTL: time.Hour},               // never held
		})
		if len(errs) != 4 || errs[0] != nil {
			t.Fatalf("Renew = %v", errs)
		}
		for i, err := range errs[1:] {
			if !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Renew[%d] = %v, want ErrNotHeld", i+1, err)
			}
		}
		wantState(t, b, "x", locker.State{Locked: true, Owner: "a", Holds: 1, TTL: 30 * time.Millisecond})
		wantState(t, b, "y", locker.State{Locked: true, Owner: "b", Holds: 1, TTL: 5 * time.Millisecond})
		wantState(t, b, "z", locker.State{})
		wantState(t, b, "w", locker.State{})
		if errs := b.Renew(ctx, nil); len(errs) != 0 {
			t.Fatalf("Renew(nil) = %v", errs)
		}
	})
}

func TestReleaseNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
		for _, c := range []struct{ key, owner string }{{"k", "b"}, {"absent", "a"}} {
			if _, err := b.Release(ctx, locker.ReleaseRequest{Key: c.key, Owner: c.owner}); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Release(%q, %q) = %v", c.key, c.owner, err)
			}
		}
		wantState(t, b, "k", locker.State{Locked: true, Owner: "a", Holds: 1, TTL: time.Second})
	})
}

func TestNotices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		n1, cancel1, err1 := b.Subscribe(ctx, "k")
		n2, cancel2, err2 := b.Subscribe(ctx, "k")
		other, cancelOther, err3 := b.Subscribe(ctx, "other")
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		defer cancelOther()
		pending := func(ch <-chan struct{}) bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}
		check := func(step string, want bool) {
			t.Helper()
			if g1, g2 := pending(n1), pending(n2); g1 != want || g2 != want {
				t.Fatalf("%s: notices %v %v, want %v", step, g1, g2, want)
			}
			if pending(other) {
				t.Fatalf("%s: notice on another key", step)
			}
		}
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
		check("acquire", false)
		of(b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"})).must(t)
		check("release leaving a hold", false)
		b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "b"})
		check("failed release", false)
		of(b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"})).must(t)
		check("release to zero", true)

		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
		if ok := of(b.ForceRelease(ctx, "k")).must(t); !ok {
			t.Fatal("ForceRelease = false")
		}
		check("force release", true)
		if ok := of(b.ForceRelease(ctx, "k")).must(t); ok {
			t.Fatal("ForceRelease of a free key = true")
		}
		check("force release of free key", false)

		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Millisecond})).must(t)
		time.Sleep(time.Millisecond)
		wantState(t, b, "k", locker.State{})
		if ok := of(b.ForceRelease(ctx, "k")).must(t); ok {
			t.Fatal("ForceRelease of an expired key = true")
		}
		check("expiry", false)

		// Notices merge: two releases, one pending value, no blocking.
		for range 2 {
			of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
			of(b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"})).must(t)
		}
		check("merged", true)
		check("merged, drained", false)

		// cancel is idempotent and concurrent-safe, and stops notices.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(cancel1)
		}
		wg.Wait()
		cancel1()
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
		of(b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "a"})).must(t)
		if pending(n1) || !pending(n2) {
			t.Fatal("cancelled subscriber notified, or live one not")
		}
		cancel2()
		cancel2()
		cancelOther()
		if len(b.subs) != 0 {
			t.Fatalf("subscriber map not emptied: %v", b.subs)
		}
	})
}

func TestContextFirst(t *testing.T) {
	b := New()
	of(b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})).must(t)
	c, cancel := context.WithCancel(ctx)
	cancel()
	errs := []error{}
	_, err := b.Acquire(c, locker.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second})
	errs = append(errs, err)
	_, err = b.Release(c, locker.ReleaseRequest{Key: "k", Owner: "a"})
	errs = append(errs, err)
	errs = append(errs, b.Renew(c, []locker.Renewal{{Key: "k", Owner: "a", TTL: time.Hour}})...)
	_, err = b.Inspect(c, "k")
	errs = append(errs, err)
	_, err = b.ForceRelease(c, "k")
	errs = append(errs, err)
	_, _, err = b.Subscribe(c, "k")
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call %d: %v, want context.Canceled", i, err)
		}
	}
	if st := of(b.Inspect(ctx, "k")).must(t); st.Holds != 1 || st.TTL > time.Second {
		t.Fatalf("state changed by cancelled calls: %+v", st)
	}
	if len(b.subs) != 0 {
		t.Fatal("cancelled Subscribe registered")
	}
}

func TestSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New()
		for i := range 2 * minSweep {
			of(b.Acquire(ctx, locker.AcquireRequest{Key: fmt.Sprint("old", i), Owner: "a", TTL: time.Millisecond})).must(t)
		}
		// The insert that doubled the map swept it, at a time nothing had expired yet.
		if len(b.locks) != 2*minSweep || b.swept != 2*minSweep {
			t.Fatalf("len %d, swept %d", len(b.locks), b.swept)
		}
		of(b.Acquire(ctx, locker.AcquireRequest{Key: "live", Owner: "a", TTL: time.Hour})).must(t)
		time.Sleep(time.Millisecond)
		for i := range 2*minSweep - 1 {
			of(b.Acquire(ctx, locker.AcquireRequest{Key: fmt.Sprint("new", i), Owner: "a", TTL: time.Hour})).must(t)
			if len(b.locks) > 4*minSweep {
				t.Fatalf("map grew to %d", len(b.locks))
			}
		}
		// The sweep at 4*minSweep removed every expired "old" entry and nothing else.
		if len(b.locks) != 2*minSweep || b.swept != 2*minSweep {
			t.Fatalf("after sweep: len %d, swept %d", len(b.locks), b.swept)
		}
		for key := range b.locks {
			if key[:3] == "old" {
				t.Fatalf("expired %q survived the sweep", key)
			}
		}
	})
}

// Eight owners take turns on one key through notices and timers, 50 times each: never two
// inside at once, every renewal and release of a holder succeeds, and nothing is left. The
// lease is an hour, so a release that does not free the key makes the workers give up at their
// deadline and fail the test, instead of being rescued by expiry or hanging the package.
func TestConcurrent(t *testing.T) {
	b := New()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var (
		wg       sync.WaitGroup
		inside   atomic.Int32 // owners between their acquire and their release
		overlaps atomic.Int32
	)
	for w := range 8 {
		owner := fmt.Sprint("w", w)
		wg.Go(func() {
			notices, stop, err := b.Subscribe(ctx, "k")
			if err != nil {
				t.Errorf("%s: Subscribe: %v", owner, err)
				return
			}
			defer stop()
			for done := 0; done < 50; {
				a, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: owner, TTL: time.Hour})
				if err != nil {
					t.Errorf("%s: gave up after %d sections: %v", owner, done, err)
					return
				}
				if !a.Acquired() {
					select {
					case <-notices:
					case <-time.After(time.Millisecond):
					case <-ctx.Done():
					}
					continue
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				runtime.Gosched() // give another owner the chance to get in, if it can
				if errs := b.Renew(ctx, []locker.Renewal{{Key: "k", Owner: owner, TTL: time.Hour}}); errs[0] != nil {
					t.Errorf("%s: Renew of its own lock: %v", owner, errs[0])
				}
				inside.Add(-1)
				if _, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: owner}); err != nil {
					t.Errorf("%s: Release of its own lock: %v", owner, err)
				}
				done++
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("two owners inside at once, %d times", n)
	}
	wantState(t, b, "k", locker.State{})
	if len(b.subs) != 0 {
		t.Fatal("subscriptions leaked")
	}
}
