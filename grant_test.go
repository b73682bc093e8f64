package locker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// acquireCounter is a memory backend that counts Acquire calls.
type acquireCounter struct {
	*memory.Backend
	acquires atomic.Int32
}

func (b *acquireCounter) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	b.acquires.Add(1)
	return b.Backend.Acquire(ctx, req)
}

// lockInBackground starts c.Lock of key and returns the channel of its Lease (nil on error).
func lockInBackground(t *testing.T, c *locker.Client, key string) <-chan *locker.Lease {
	got := make(chan *locker.Lease, 1)
	go func() {
		l, err := c.Lock(context.Background(), key)
		if err != nil {
			t.Errorf("Lock: %v", err)
		}
		got <- l
	}()
	return got
}

// grantedLease makes a Client hold "k" on b and another one, with ttl, wait for it, unlocks the
// first, and returns the waiter's Lease, which must come without another call of the waiter's
// (in a synctest bubble). Both Clients close at the end of the test.
func grantedLease(t *testing.T, b *acquireCounter, ttl time.Duration) *locker.Lease {
	t.Helper()
	holder, waiter := locker.New(b, locker.WithTTL(ttl)), locker.New(b, locker.WithTTL(ttl))
	t.Cleanup(func() { holder.Close(); waiter.Close() })
	held, err := holder.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	got := lockInBackground(t, waiter, "k")
	synctest.Wait() // it waits in the backend's queue
	before := b.acquires.Load()
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	select {
	case l := <-got:
		if l == nil {
			t.FailNow()
		}
		if n := b.acquires.Load() - before; n != 0 {
			t.Fatalf("the waiter made %d Acquire calls to take its grant, want none", n)
		}
		return l
	default:
		t.Fatal("the waiter's Lock did not return on the grant's notice")
	}
	return nil
}

// A Lock that waits behind another Client's hold gets the key that the holder's Unlock granted
// it as soon as the notice comes, with no call of its own, before or after: the watchdog renews
// the grant's lease (at most 2s) to the TTL a third into it, and the Unlock frees the key and
// ends the grant's record in the queue.
func TestGrantTakenOnNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := &acquireCounter{Backend: memory.New()}
		l := grantedLease(t, b, 6*time.Second)
		if st, _ := b.Inspect(ctx, "k"); !st.Locked || st.Owner != l.Owner() || st.Holds != 1 || st.TTL > 2*time.Second {
			t.Fatalf("after the grant: %+v, want the waiter's owner %s holding it once, for the grant's lease (<= 2s)", st, l.Owner())
		}
		time.Sleep(3 * time.Second) // past the grant's lease
		if err := context.Cause(l.Context()); err != nil {
			t.Fatalf("the granted lease ended (%v) past the grant's lease: it must be renewed", err)
		}
		if st, _ := b.Inspect(ctx, "k"); !st.Locked || st.Owner != l.Owner() || st.TTL <= 2*time.Second {
			t.Fatalf("after 3s: %+v, want the waiter holding it, renewed to its TTL (6s)", st)
		}
		if err := l.Unlock(); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if st, _ := b.Inspect(ctx, "k"); st.Locked || st.Queued != 0 {
			t.Fatalf("after Unlock: %+v, want free, with nobody queued", st)
		}
	})
}

// When the grant is gone before the Lease's first renewal (forced away), the renewal finds it
// out: the Lease is lost (ErrLockLost) a third into the grant's lease, and its Unlock says
// ErrNotHeld.
func TestGrantLostAtFirstRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := &acquireCounter{Backend: memory.New()}
		l := grantedLease(t, b, 6*time.Second)
		if _, err := b.ForceRelease(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // a third into the grant's lease (2s), and some
		if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
			t.Fatalf("the lease's cause after its grant was forced away = %v, want ErrLockLost", cause)
		}
		if err := l.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("Unlock of a lost grant = %v, want ErrNotHeld", err)
		}
	})
}

// refusalBarrier is a memory backend whose first n Acquire calls that wait (Wait > 0) proceed
// together, once all n have come: n Lock calls of one Client are all refused before any of them
// makes the Client's local turn.
type refusalBarrier struct {
	*memory.Backend
	mu      sync.Mutex
	n       int
	arrived chan struct{}
}

func (b *refusalBarrier) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if req.Wait > 0 {
		b.mu.Lock()
		wait := b.n > 0
		if wait {
			if b.n--; b.n == 0 {
				close(b.arrived)
			}
		}
		b.mu.Unlock()
		if wait {
			<-b.arrived
		}
	}
	return b.Backend.Acquire(ctx, req)
}

// Lock calls of one Client that were refused by the backend, and then wait in the Client's
// local turn behind another of them, leave no entry in the backend's queue: a release would
// grant them the key while they do not listen, and it would stay idle for the grant's lease.
func TestTurnWaitersLeaveTheBackendQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := &refusalBarrier{Backend: memory.New(), arrived: make(chan struct{})}
		holder, c := locker.New(b, locker.WithTTL(time.Second)), locker.New(b, locker.WithTTL(time.Second))
		defer holder.Close()
		defer c.Close()
		held, err := holder.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		b.n = 4 // the next 4 are refused together
		b.mu.Unlock()
		got := make(chan *locker.Lease, 4)
		for range 4 {
			go func() { got <- <-lockInBackground(t, c, "k") }()
		}
		synctest.Wait()
		if st, _ := b.Inspect(ctx, "k"); st.Queued != 1 {
			t.Fatalf("with 4 Lock calls of one Client waiting: %d entries in the backend's queue, want 1 (the call that contends for the others)", st.Queued)
		}
		start := time.Now()
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			l := <-got // in any order: each unlocks before the next gets the key
			if l == nil {
				t.FailNow()
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d > 0 {
			t.Errorf("the 4 Locks took %v of the bubble's clock after the Unlock, want none (no grant left idle)", d)
		}
	})
}
