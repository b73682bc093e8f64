package conformance

import (
	"context"
	"errors"

	"github.com/hashlock/locker"
)

// With WithFencing, each new lock of a key gets a larger token than the one before, whichever
// Client takes it; a re-entry has the token of the hold it re-enters; without WithFencing, a
// lease's token is 0.
func fencing(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("fencing")
	a, b := e.client(locker.WithFencing()), e.client(locker.WithFencing())
	var last uint64
	for i, c := range []*locker.Client{a, b, a} {
		outer := ok(c.Lock(ctx, key))(t)
		inner := ok(c.Lock(outer.Context(), key))(t)
		if outer.Token() <= last || inner.Token() != outer.Token() {
			t.Fatalf("lock %d: tokens %d (lock) and %d (re-entry) after %d: want one token, larger",
				i, outer.Token(), inner.Token(), last)
		}
		last = outer.Token()
		ok(0, inner.Unlock())(t)
		ok(0, outer.Unlock())(t)
	}
	plain := ok(e.client().Lock(ctx, key))(t)
	defer plain.Unlock()
	if plain.Token() != 0 {
		t.Fatalf("a lease without WithFencing has token %d, want 0", plain.Token())
	}
}

// A Lock whose ctx ends while its acquire is in flight, after the acquire took effect, takes
// that hold back: another owner gets the lock well within a TTL (woken by the release notice,
// or by its timer, a twentieth of a TTL).
func noOrphanedHold(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("orphan")
	applied := e.probe.faults.loseReplies("Acquire", 1, nil)
	short, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.client().Lock(short, key)
		done <- err
	}()
	<-applied
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock whose ctx ended during the acquire = %v, want context.Canceled", err)
	}
	nextOwnerWithinHalfTTL(e, key, "the abandoned acquire left its hold")
}

// nextOwnerWithinHalfTTL fails the test unless another owner gets key within half a TTL.
func nextOwnerWithinHalfTTL(e *env, key, why string) {
	e.t.Helper()
	within, stop := context.WithTimeout(background(e.t), e.ttl/2)
	defer stop()
	l, err := e.client().Lock(within, key, locker.WithRetry(locker.LinearBackoff(e.ttl/20)))
	if err != nil {
		e.t.Fatalf("another owner within half a TTL: %v; %s", err, why)
	}
	ok(0, l.Unlock())(e.t)
}

// An acquire whose reply is lost (the backend unavailable) is sent again with the same request
// ID: the lock is held once, not twice, and one Unlock frees it.
func lostAcquireReply(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("lost-acquire")
	c := e.client()
	e.probe.faults.loseReplies("Acquire", 1, errLostReply)
	outer := ok(c.Lock(ctx, key))(t)
	if outer.Holds() != 1 {
		t.Fatalf("Lock after a lost reply: %d holds, want 1", outer.Holds())
	}
	e.probe.faults.loseReplies("Acquire", 1, errLostReply)
	inner := ok(c.Lock(outer.Context(), key))(t)
	if st := inspect(e, key); inner.Holds() != 2 || st.Holds != 2 {
		t.Fatalf("re-entry after a lost reply: %d holds (backend: %d), want 2", inner.Holds(), st.Holds)
	}
	ok(0, inner.Unlock())(t)
	ok(0, outer.Unlock())(t)
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after both Unlocks: %+v, want free", st)
	}
	// TryLock does not retry: it returns the error and takes its acquire back.
	e.probe.faults.loseReplies("Acquire", 1, errLostReply)
	if _, err := c.TryLock(ctx, key); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryLock with a lost reply = %v, want ErrUnavailable", err)
	}
	nextOwnerWithinHalfTTL(e, key, "TryLock's acquire, whose reply was lost, left its hold")
}

// A release whose reply is lost is sent again with the same request ID: it removes one hold,
// never two, so the outer lease still holds the lock. The outer Unlock's release, whose reply is
// lost too, sent again, reports the first outcome (the backend remembers it for the
// ReleaseRequest.ReplyWindow the Client sets), not ErrNotHeld.
func lostReleaseReply(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("lost-release")
	c := e.client()
	outer := ok(c.Lock(ctx, key))(t)
	inner := ok(c.Lock(outer.Context(), key))(t)
	e.probe.faults.loseReplies("Release", 1, errLostReply)
	if err := inner.Unlock(); err != nil {
		t.Fatalf("Unlock after a lost reply: %v", err)
	}
	if st := inspect(e, key); st.Holds != 1 {
		t.Fatalf("after the inner Unlock: %d holds, want the outer one", st.Holds)
	}
	if _, err := e.client().TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("another owner while the outer lease holds: %v, want ErrNotObtained", err)
	}
	e.probe.faults.loseReplies("Release", 1, errLostReply)
	if err := outer.Unlock(); err != nil {
		t.Fatalf("outer Unlock after a lost reply: %v", err)
	}
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after both Unlocks: %+v, want free", st)
	}
}
