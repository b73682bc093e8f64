package locker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// Readers share a key; a writer waits for them, and once it waits new readers wait behind it.
func TestReadersShareAndWritersAreNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := locker.New(memory.New(), locker.WithTTL(time.Second))
		defer c.Close()
		ctx := context.Background()
		r1 := must(c.RLock(ctx, "k"))(t)
		r2 := must(c.RLock(ctx, "k"))(t)
		if !r1.Shared() || r1.Holds() != 1 || r2.Holds() != 1 {
			t.Fatalf("readers: %v, %v", r1, r2)
		}
		if st := must(c.Inspect(ctx, "k"))(t); !st.Shared || st.Readers != 2 || st.Holds != 2 {
			t.Fatalf("Inspect with two readers: %+v", st)
		}
		if _, err := c.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("TryLock with readers = %v, want ErrNotObtained", err)
		}
		wrote := make(chan *locker.Lease)
		go func() {
			w, err := c.Lock(ctx, "k")
			if err != nil {
				t.Error(err)
			}
			wrote <- w
		}()
		synctest.Wait() // the writer waits, queued
		if st := must(c.Inspect(ctx, "k"))(t); st.Queued != 1 {
			t.Fatalf("Inspect with a waiting writer: %+v, want Queued 1", st)
		}
		if _, err := c.TryRLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("TryRLock behind a waiting writer = %v, want ErrNotObtained", err)
		}
		// A reader re-enters its own hold whatever waits.
		again := must(c.RLock(r1.Context(), "k"))(t)
		for _, l := range []*locker.Lease{again, r1, r2} {
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		w := <-wrote
		if w.Shared() {
			t.Fatal("Lock gave a shared lease")
		}
		if _, err := c.TryRLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("TryRLock under a writer = %v, want ErrNotObtained", err)
		}
		if err := w.Unlock(); err != nil {
			t.Fatal(err)
		}
		if st := must(c.Inspect(ctx, "k"))(t); st.Locked || st.Queued != 0 || st.Holders != nil {
			t.Fatalf("after everything: %+v", st)
		}
	})
}

// A writer that gives up stops blocking readers at once.
func TestWriterThatGivesUpLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := locker.New(memory.New(), locker.WithTTL(time.Minute))
		defer c.Close()
		ctx := context.Background()
		r := must(c.RLock(ctx, "k"))(t)
		defer r.Unlock()
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := c.Lock(wctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock = %v, want DeadlineExceeded", err)
		}
		synctest.Wait() // the background Dequeue
		if st := must(c.Inspect(ctx, "k"))(t); st.Queued != 0 {
			t.Fatalf("after the writer gave up: %+v, want nobody queued", st)
		}
		must(c.TryRLock(ctx, "k"))(t).Unlock()
	})
}

// Upgrade fails at once and changes nothing; downgrade keeps a shared hold after the writer's
// Unlock.
func TestUpgradeAndDowngrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := locker.New(memory.New(), locker.WithTTL(time.Second))
		defer c.Close()
		ctx := context.Background()
		r := must(c.RLock(ctx, "k"))(t)
		if _, err := c.Lock(r.Context(), "k"); !errors.Is(err, locker.ErrUpgrade) {
			t.Fatalf("upgrade = %v, want ErrUpgrade", err)
		}
		if st := must(c.Inspect(ctx, "k"))(t); !st.Shared || st.Holds != 1 {
			t.Fatalf("after a refused upgrade: %+v", st)
		}
		must(0, r.Unlock())(t)

		w := must(c.Lock(ctx, "k"))(t)
		down := must(c.RLock(w.Context(), "k"))(t)
		if down.Holds() != 2 || !down.Shared() {
			t.Fatalf("downgrade: %v", down)
		}
		must(0, w.Unlock())(t)
		if st := must(c.Inspect(ctx, "k"))(t); !st.Shared || st.Readers != 1 {
			t.Fatalf("after the writer's Unlock: %+v, want one reader", st)
		}
		other := must(c.TryRLock(ctx, "k"))(t)
		time.Sleep(3 * time.Second) // the watchdog renews both
		if down.Context().Err() != nil || other.Context().Err() != nil {
			t.Fatal("a shared lease was lost while renewed")
		}
		must(0, down.Unlock())(t)
		must(0, other.Unlock())(t)
	})
}

// Fair Lock calls of separate Clients obtain the lock in the order in which they asked; a fair
// TryLock never jumps the queue.
func TestFairOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		ctx := context.Background()
		holder := locker.New(b, locker.WithTTL(time.Second))
		defer holder.Close()
		first := must(holder.Lock(ctx, "k"))(t)
		order := make(chan int, 4)
		var leases [4]chan *locker.Lease
		for i := range 4 {
			leases[i] = make(chan *locker.Lease, 1)
			c := locker.New(b, locker.WithTTL(time.Second), locker.WithFair())
			defer c.Close()
			go func() {
				l, err := c.Lock(ctx, "k")
				if err != nil {
					t.Error(err)
					return
				}
				order <- i
				leases[i] <- l
			}()
			synctest.Wait() // queued before the next one asks
		}
		if _, err := holder.TryLock(ctx, "k", locker.WithFair()); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("fair TryLock = %v, want ErrNotObtained", err)
		}
		must(0, first.Unlock())(t)
		for want := range 4 {
			if got := <-order; got != want {
				t.Fatalf("waiter %d obtained the lock in turn %d", got, want)
			}
			l := <-leases[want]
			time.Sleep(100 * time.Millisecond)
			must(0, l.Unlock())(t)
		}
	})
}

// Without KindLocker, RLock and WithFair are unsupported.
func TestKindsUnsupported(t *testing.T) {
	c := locker.New(plainLocker{memory.New()})
	defer c.Close()
	if _, err := c.RLock(context.Background(), "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("RLock on a plain Locker = %v, want ErrUnsupported", err)
	}
	if _, err := c.Lock(context.Background(), "k", locker.WithFair()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("fair Lock on a plain Locker = %v, want ErrUnsupported", err)
	}
}

// plainLocker hides every method but Locker's.
type plainLocker struct{ locker.Locker }

// must returns v, failing the test on err.
func must[V any](v V, err error) func(testing.TB) V {
	return func(t testing.TB) V {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
