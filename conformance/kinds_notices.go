package conformance

import (
	"context"
	"time"

	"github.com/hashlock/locker"
)

// The notices of shared holds: besides a release that frees the key, a writer's last exclusive
// release that leaves it reading (a downgrade), and a reader's grant that lets the readers
// behind it in, wake the readers that wait. Each property checks a reader whose fallback timers
// are far away (a long lease, a one-hour backoff: it refreshes its queue entry every third of
// its lease, after 3⅓ TTLs) and which must get in within half a TTL: only the notice can have
// woken it, on a real server too.

// waitingReader starts an RLock of key with opts on a new Client whose timers are far away, and
// returns the channel of its outcome and when it obtained the key.
func waitingReader(e *env, key string, opts ...locker.Option) (done <-chan error, acquired *time.Time) {
	got, at := make(chan error, 1), new(time.Time)
	c, ctx := e.client(append([]locker.Option{locker.WithTTL(10 * e.ttl)}, opts...)...), background(e.t)
	go func() {
		l, err := c.RLock(ctx, key, locker.WithRetry(locker.LinearBackoff(time.Hour)))
		*at = time.Now()
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	return got, at
}

// expectJoined fails the test unless the waiting reader (waitingReader) obtained the key within
// half a TTL of from, when what happened.
func expectJoined(e *env, done <-chan error, acquired *time.Time, from time.Time, what string) {
	e.t.Helper()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatalf("the waiting reader: %v", err)
		}
	case <-time.After(e.ttl):
		e.t.Fatalf("the waiting reader was not woken within a TTL of %s", what)
	}
	if d := acquired.Sub(from); d > e.ttl/2 {
		e.t.Fatalf("the waiting reader got in %v after %s, want well under a TTL", d, what)
	}
}

// A writer's Unlock that leaves it reading (a downgrade) wakes the readers that wait: they may
// join now.
func downgradeWakesReaders(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("downgrade-wakes")
	skipWithoutNotices(e, key)
	c := e.client(locker.WithTTL(10 * e.ttl)) // the writer's lease bounds the reader's timer
	w := ok(c.Lock(ctx, key))(t)
	own := ok(c.RLock(w.Context(), key))(t)
	refusals := e.probe.faults.watchRefusals()
	done, acquired := waitingReader(e, key)
	waitForRefusal(e, refusals, key, 2) // before and after subscribing
	released := time.Now()
	ok(0, w.Unlock())(t)
	expectJoined(e, done, acquired, released, "the writer's Unlock that left it reading")
	ok(0, own.Unlock())(t)
}

// A fair reader that gets in past a writer's entry that ended without a notice (its process
// died) wakes the fair readers that wait behind it: they may join now. The writer's entry and
// the first reader's are made at the Locker level; the reader behind them is a Client's RLock.
func readerWakesReaders(e *env) {
	t, ctx, key, b := e.t, background(e.t), e.key("reader-wakes"), e.kindProbe()
	skipWithoutNotices(e, key)
	holder := locker.AcquireRequest{Key: key, Owner: "holder", TTL: 10 * e.ttl}
	if a := ok(b.Acquire(ctx, holder))(t); !a.Acquired() {
		t.Fatalf("Acquire of a free key = %+v", a)
	}
	wait := e.ttl // the dead writer's entry lives this long
	queuedAt := time.Now()
	if a := ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "dead-writer", TTL: e.ttl, Fair: true, Wait: wait}))(t); a.Acquired() {
		t.Fatal("a writer was granted a key that another holds")
	}
	first := locker.AcquireRequest{Key: key, Owner: "slow-reader", TTL: 10 * e.ttl, Shared: true, Fair: true, Wait: 10 * e.ttl}
	if a := ok(b.Acquire(ctx, first))(t); a.Acquired() {
		t.Fatal("a reader was granted a key that a writer holds")
	}
	defer func() {
		_ = b.Dequeue(context.Background(), key, first.Owner)
		_, _ = b.Release(context.Background(), locker.ReleaseRequest{Key: key, Owner: first.Owner, Shared: true})
	}()
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: holder.Owner}))(t) // free; the writer's entry is first

	refusals := e.probe.faults.watchRefusals()
	done, acquired := waitingReader(e, key, locker.WithFair())
	timeout := time.After(10 * e.ttl)
	for n := 2; n > 0; { // refused before and after subscribing, behind the writer's entry
		select {
		case k := <-refusals:
			if k == key {
				n--
			}
		case err := <-done:
			// It got in at once: the writer's entry had ended already (a loaded machine).
			t.Skipf("the reader came %v after the writer queued for %v: nothing to check (err %v)", time.Since(queuedAt), wait, err)
		case <-timeout:
			t.Fatal("the reader did not try the lock")
		}
	}
	e.settle()

	time.Sleep(time.Until(queuedAt.Add(wait)))
	var admitted time.Time
	for {
		sent := time.Now()
		a := ok(b.Acquire(ctx, first))(t)
		if a.Acquired() {
			admitted = sent // its notice may reach the reader before its reply reaches us
			break
		}
		if time.Since(queuedAt) > wait+e.ttl {
			t.Fatalf("the first reader was still refused (%+v) a TTL after the dead writer's entry ended", a)
		}
		time.Sleep(e.ttl / 50) // the server's clock may be a little behind ours
	}
	expectJoined(e, done, acquired, admitted, "the grant of the fair reader ahead of it")
}
