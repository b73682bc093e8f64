package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/hashlock/locker"
)

// Lock's ctx bounds the wait, not the lease: the lease's context keeps the ctx's values but not
// its deadline or cancellation, so work under a lock obtained with context.WithTimeout is not
// cancelled at that timeout. It ends on Unlock, with context.Canceled.
func waitCtxBoundsWaitOnly(e *env) {
	t, key := e.t, e.key("wait-ctx")
	type traceKey struct{}
	parent := context.WithValue(background(t), traceKey{}, "trace-1")

	// A Lock that had to wait: another owner holds the key until the waiter has been refused.
	refusals := e.probe.faults.watchRefusals()
	holder := ok(e.client().Lock(background(t), key))(t)
	waitCtx, cancel := context.WithTimeout(parent, 10*e.ttl)
	defer cancel()
	got := make(chan leaseOrError, 1)
	go func() {
		l, err := e.client().Lock(waitCtx, key, locker.WithRetry(locker.LinearBackoff(e.ttl/20)))
		got <- leaseOrError{l, err}
	}()
	waitForRefusal(e, refusals, key, 1)
	ok(0, holder.Unlock())(t)
	l := (<-got).get(t, "the waiting Lock")
	defer l.Unlock()
	cancel() // as a caller's "defer cancel()" does once Lock returned
	if err := l.Context().Err(); err != nil {
		t.Fatalf("the lease's context ended with the ctx given to Lock: %v", context.Cause(l.Context()))
	}
	if d, ok := l.Context().Deadline(); ok {
		t.Fatalf("a renewed lease's context has a deadline (%v): it took the wait's", time.Until(d))
	}
	if v := l.Context().Value(traceKey{}); v != "trace-1" {
		t.Fatalf("the lease's context lost the values of Lock's ctx: got %v", v)
	}
	// Re-entry through the lease's context still works once Lock's ctx has ended.
	inner := ok(e.client().TryLock(l.Context(), key))(t)
	if inner.Holds() != 2 {
		t.Fatalf("re-entry after the wait's ctx ended: %d holds, want 2", inner.Holds())
	}
	ok(0, inner.Unlock())(t)

	// The same for a deadline that passes while the lease is held, and for TryLock.
	short, stop := context.WithTimeout(parent, e.ttl/10)
	defer stop()
	other := ok(e.client().TryLock(short, e.key("wait-ctx-deadline")))(t)
	<-short.Done()
	if err := other.Context().Err(); err != nil {
		t.Fatalf("the lease's context ended at TryLock's deadline: %v", context.Cause(other.Context()))
	}
	ok(0, other.Unlock())(t)
	if cause := context.Cause(other.Context()); !errors.Is(cause, context.Canceled) {
		t.Fatalf("after Unlock the lease's cause is %v, want context.Canceled", cause)
	}
}

// leaseOrError is what a Lock run in a goroutine sends back: the test's goroutine checks it (a
// goroutine must not fail a test that may have ended).
type leaseOrError struct {
	l   *locker.Lease
	err error
}

// get returns the lease, failing the test with what on an error.
func (r leaseOrError) get(t interface {
	Helper()
	Fatalf(string, ...any)
}, what string) *locker.Lease {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	return r.l
}

// A re-entry never takes a new lock: once the owner's hold is gone from the backend (forced
// away, expired, taken by another owner), a Lock whose ctx carries that ownership fails with
// ErrLockLost and leaves the key as it is — also through context.WithoutCancel, after the Client
// itself saw the loss. An explicit owner (WithOwner) that locks again gets a fresh lock, and its
// old leases end.
func reentryAfterLoss(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("vanished")
	reenter := func(what string, lctx context.Context, holder string) {
		t.Helper()
		l, err := c.Lock(lctx, key)
		if !errors.Is(err, locker.ErrLockLost) {
			l.Unlock()
			t.Fatalf("%s: re-entry = %v, want ErrLockLost", what, err)
		}
		st := inspect(e, key)
		if st.Locked != (holder != "") || st.Owner != holder {
			t.Fatalf("%s: after the failed re-entry the key is %+v, want the holder %q untouched", what, st, holder)
		}
	}

	// Forced away behind the Client's back.
	outer := ok(c.Lock(ctx, key))(t)
	ok(e.probe.faults.ForceRelease(ctx, key))(t)
	reenter("forced away", outer.Context(), "")
	if cause := context.Cause(outer.Context()); !errors.Is(cause, locker.ErrLockLost) {
		t.Fatalf("the outer lease's cause = %v, want ErrLockLost", cause)
	}
	if err := outer.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Unlock of the lost outer lease = %v, want ErrNotHeld", err)
	}

	// Forced away, and the Client saw it: the lease's context ended; a context that keeps its
	// values but not its end still carries the lost ownership.
	outer = ok(c.Lock(ctx, key))(t)
	ok(e.probe.faults.ForceRelease(ctx, key))(t)
	endsLost(e, outer, time.Now().Add(e.ttl), "the watchdog did not see the forced release within a TTL")
	reenter("seen lost, through the ended lease context", outer.Context(), "")
	reenter("seen lost, through WithoutCancel", context.WithoutCancel(outer.Context()), "")

	// A fixed lease that ran out.
	fixed := ok(c.Lock(ctx, key, locker.WithoutRenewal(), locker.WithTTL(e.ttl/4)))(t)
	endsLost(e, fixed, time.Now().Add(e.ttl), "a fixed lease's context was still live a TTL after it")
	time.Sleep(e.ttl / 4) // past the backend's expiry too
	reenter("expired", context.WithoutCancel(fixed.Context()), "")

	// Taken by another owner meanwhile: the re-entry is refused, the holder untouched.
	outer = ok(c.Lock(ctx, key))(t)
	ok(e.probe.faults.ForceRelease(ctx, key))(t)
	other := ok(e.client().Lock(ctx, key))(t)
	reenter("taken by another owner", context.WithoutCancel(outer.Context()), other.Owner())
	ok(0, other.Unlock())(t)

	first := ok(c.Lock(ctx, key, locker.WithOwner("shared")))(t)
	ok(e.probe.faults.ForceRelease(ctx, key))(t)
	again := ok(c.Lock(ctx, key, locker.WithOwner("shared")))(t)
	defer again.Unlock()
	if again.Holds() != 1 {
		t.Fatalf("a fresh lock by an explicit owner: holds %d, want 1", again.Holds())
	}
	if cause := context.Cause(first.Context()); !errors.Is(cause, locker.ErrLockLost) {
		t.Fatalf("the explicit owner's vanished lease has cause %v, want ErrLockLost", cause)
	}
	if again.Context().Err() != nil {
		t.Fatal("the fresh lease ended with the vanished one")
	}
}

// WithHeldOwner re-enters the hold of another Client's lease (another process, as a nested
// "locker run"), releases only its own hold, and never takes a new lock.
func heldOwner(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("held-owner")
	a, b := e.client(), e.client()
	outer := ok(a.Lock(ctx, key))(t)
	inner := ok(b.TryLock(ctx, key, locker.WithHeldOwner(outer.Owner())))(t)
	if inner.Holds() != 2 {
		t.Fatalf("WithHeldOwner of a held lock: %d holds, want 2", inner.Holds())
	}
	ok(0, inner.Unlock())(t)
	if st := inspect(e, key); st.Holds != 1 || st.Owner != outer.Owner() {
		t.Fatalf("after the inner Unlock: %+v, want the outer hold alone", st)
	}
	if _, err := e.client().TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("another owner while the outer lease holds: %v, want ErrNotObtained", err)
	}
	ok(0, outer.Unlock())(t)
	if l, err := b.Lock(ctx, key, locker.WithHeldOwner(outer.Owner())); !errors.Is(err, locker.ErrLockLost) {
		l.Unlock()
		t.Fatalf("WithHeldOwner of a released hold = %v, want ErrLockLost", err)
	}
	if st := inspect(e, key); st.Locked {
		t.Fatalf("WithHeldOwner of a released hold took a new lock: %+v", st)
	}
}

// The watchdog renews a lease a third of a TTL after it was set (a sixth earlier at most, to
// batch it with others), so that a renewal can fail twice before the lease may run out.
func renewalCadence(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("cadence")
	start := time.Now()
	l := ok(c.Lock(ctx, key))(t)
	defer l.Unlock()
	acquired := time.Now()
	time.Sleep(time.Until(start.Add(2 * e.ttl)))
	times := e.probe.faults.renewTimes()
	late := time.Duration(0) // how late a timer may fire: none in a bubble
	if !e.sync {
		late = e.ttl / 6
	}
	if len(times) == 0 {
		t.Fatal("no renewal within two TTLs")
	}
	if first := times[0]; first.Before(start.Add(e.ttl/6)) || first.After(acquired.Add(e.ttl/3+late)) {
		t.Fatalf("first renewal %v after Lock, want between a sixth and a third of the TTL (%v)", first.Sub(start), e.ttl)
	}
	least := 5 // at a third, two thirds... of the TTL, up to two TTLs, in a bubble: exact
	if !e.sync {
		least = 4 // each renewal may come a little late, and counts from the previous one
	}
	if n := len(times); n < least || n > 8 {
		t.Fatalf("%d renewals in two TTLs, want one every third of a TTL", n)
	}
}
