package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/hashlock/locker"
)

// inTurn makes two Lock calls of c on key wait behind a holder of c, lets the first of them
// take the key (it then holds the Client's local turn, the second waiting in it), and returns
// that one's Lease and the channel on which the second one's result comes. opts are the second
// call's options.
func inTurn(e *env, c *locker.Client, key string, opts ...locker.Option) (*locker.Lease, <-chan leaseOrError) {
	t, ctx := e.t, background(e.t)
	refusals := e.probe.faults.watchRefusals()
	holder := ok(c.Lock(ctx, key))(t)
	first, second := make(chan leaseOrError, 1), make(chan leaseOrError, 1)
	go func() {
		l, err := c.Lock(ctx, key)
		first <- leaseOrError{l, err}
	}()
	waitForRefusal(e, refusals, key, 1) // refused, it makes the turn; the second waits in it
	go func() {
		l, err := c.Lock(ctx, key, opts...)
		second <- leaseOrError{l, err}
	}()
	e.settle()
	ok(0, holder.Unlock())(t)
	select {
	case r := <-first:
		return r.get(t, "the first Lock in line"), second
	case <-time.After(2 * e.ttl):
		t.Fatal("the first Lock in line did not get the key within 2 TTLs of the Unlock")
	}
	return nil, nil
}

// On a backend that is a locker.HandOffer, an Unlock with another Lock call of the same Client
// waiting hands the key to it: one HandOff, no Release and no Acquire; the backend shows the new
// owner, whose lease is renewed and released as any other. A call that needs the backend's
// answer first (a fencing token) declines, and gets the key by a release and an acquire. When
// the giver's hold was gone, its Unlock fails with ErrNotHeld and the taker's lease is lost.
func handOff(e *env) {
	t, ctx := e.t, background(e.t)
	if _, isHandOffer := e.backend().(locker.HandOffer); !isHandOffer {
		t.Skip("the backend is no locker.HandOffer")
	}
	c, key := e.client(), e.key("hand-off")
	giver, next := inTurn(e, c, key)
	before := e.probe.Calls()
	ok(0, giver.Unlock())(t)
	var taker *locker.Lease
	select {
	case r := <-next:
		taker = r.get(t, "the Lock handed the key")
	case <-time.After(2 * e.ttl):
		t.Fatal("the waiting Lock did not get the key within 2 TTLs of the Unlock")
	}
	if calls := e.probe.Calls().Sub(before); calls.HandOff != 1 || calls.Release != 0 || calls.Acquire != 0 {
		t.Fatalf("an Unlock with a local waiter made %+v calls, want one HandOff and no Release or Acquire", calls)
	}
	if st := inspect(e, key); !st.Locked || st.Owner != taker.Owner() || st.Holds != 1 {
		t.Fatalf("after the hand-off: %+v, want the taker %s holding once", st, taker.Owner())
	}
	time.Sleep(2 * e.ttl) // renewed past two leases
	if err := context.Cause(taker.Context()); err != nil {
		t.Fatalf("the taker's lease ended (%v): a handed-off lease must be renewed", err)
	}
	ok(0, taker.Unlock())(t)
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after the taker's Unlock: %+v, want free", st)
	}

	// A fenced Lock declines: the giver releases, and it acquires with a new token.
	giver, next = inTurn(e, c, e.key("hand-off-fenced"), locker.WithFencing())
	before = e.probe.Calls()
	ok(0, giver.Unlock())(t)
	select {
	case r := <-next:
		fenced := r.get(t, "the fenced Lock in line")
		if fenced.Token() == 0 {
			t.Fatal("the fenced Lock got no token")
		}
		ok(0, fenced.Unlock())(t)
	case <-time.After(2 * e.ttl):
		t.Fatal("the fenced Lock in line did not get the key within 2 TTLs")
	}
	if calls := e.probe.Calls().Sub(before); calls.HandOff != 0 || calls.Release < 1 {
		t.Fatalf("an Unlock with a fenced local waiter made %+v calls, want a Release and no HandOff", calls)
	}

	// The giver's hold was forced away: its Unlock says so, and the taker's lease is lost.
	key = e.key("hand-off-lost")
	giver, next = inTurn(e, c, key)
	ok(e.probe.faults.ForceRelease(ctx, key))(t)
	if err := giver.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("the Unlock of a forced-away hold with a local waiter = %v, want ErrNotHeld", err)
	}
	select {
	case r := <-next:
		lost := r.get(t, "the Lock handed a gone hold")
		select {
		case <-lost.Context().Done():
		case <-time.After(2 * e.ttl):
			t.Fatal("the lease handed a gone hold was not lost within 2 TTLs")
		}
		if cause := context.Cause(lost.Context()); !errors.Is(cause, locker.ErrLockLost) {
			t.Fatalf("the lease handed a gone hold ended with %v, want ErrLockLost", cause)
		}
		_ = lost.Unlock()
	case <-time.After(2 * e.ttl):
		t.Fatal("the waiting Lock did not return within 2 TTLs")
	}
}
