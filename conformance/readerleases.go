package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/hashlock/locker"
)

// Every reader's hold keeps its own lease: a reader with a short lease that joins and leaves a
// key held by a reader with a long, renewed lease never shortens the long one. Past the short
// lease, and before the long reader's watchdog renews, a writer is still refused, and the long
// reader still holds the key alone; once it unlocks, a writer gets the key.
func readerLeases(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("reader-leases")
	long := e.client(locker.WithTTL(3 * e.ttl)) // renewed a third into its lease: at one TTL
	short := e.client(locker.WithTTL(e.ttl * 3 / 10))
	a := ok(long.RLock(ctx, key))(t)
	start := time.Now()
	b := ok(short.RLock(ctx, key))(t)
	time.Sleep(time.Until(start.Add(e.ttl * 15 / 100)))
	ok(0, b.Unlock())(t)
	time.Sleep(time.Until(start.Add(e.ttl / 2))) // past the short lease, by 20% of a TTL
	l, err := e.client().TryLock(ctx, key)
	expectRefused(t, "TryLock after a short reader left, while a reader with a longer lease holds the key", l, err)
	st := inspect(e, key)
	if !st.Shared || st.Readers != 1 || st.Owner != a.Owner() || st.TTL <= e.ttl {
		t.Fatalf("after the short reader left: %+v, want it shared by the long reader alone, more than %v of lease left", st, e.ttl)
	}
	if err := a.Context().Err(); err != nil {
		t.Fatalf("the long reader's lease context ended: %v", context.Cause(a.Context()))
	}
	ok(0, a.Unlock())(t)
	w := ok(e.client().TryLock(ctx, key))(t)
	ok(0, w.Unlock())(t)
}

// Fixed leases of different lengths: each reader holds the key until its own lease ends. A
// writer that waits while a reader with a long fixed lease and one with a short one hold the key
// does not get it when the short one unlocks (a tenth of a TTL after it locked, long before its
// lease of 0.3 TTL ends), only once the long lease has ended, and by then the long reader's lease
// context has ended (its deadline is before the writer's Lock returns).
func fixedReaderLeases(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("fixed-reader-leases")
	long := e.client(locker.WithoutRenewal())
	short := e.client(locker.WithoutRenewal(), locker.WithTTL(e.ttl*3/10))
	start := time.Now()
	r1 := ok(long.RLock(ctx, key))(t)
	time.Sleep(time.Until(start.Add(e.ttl * 3 / 100)))
	r2 := ok(short.RLock(ctx, key))(t)
	r2Taken := time.Now()

	type result struct {
		l    *locker.Lease
		err  error
		at   time.Time
		lost bool // r1's lease context had ended when the writer's Lock returned
	}
	got := make(chan result, 1)
	go func() {
		within, cancel := context.WithTimeout(ctx, 2*e.ttl)
		defer cancel()
		l, err := e.client().Lock(within, key, locker.WithRetry(locker.LinearBackoff(e.ttl/50)))
		got <- result{l, err, time.Now(), r1.Context().Err() != nil}
	}()
	time.Sleep(time.Until(r2Taken.Add(e.ttl / 10)))
	if err := r2.Unlock(); err != nil {
		// Late on a loaded machine, past its own fixed lease: what follows still holds.
		if d, _ := r2.Context().Deadline(); !errors.Is(err, locker.ErrNotHeld) || time.Now().Before(d) {
			t.Fatalf("the short reader's Unlock: %v", err)
		}
		t.Logf("the short reader unlocked after its lease ended (%v after it was taken)", time.Since(r2Taken))
	}
	w := <-got
	if w.err != nil {
		t.Fatalf("the writer's Lock: %v, want the key once the long reader's lease ended", w.err)
	}
	defer w.l.Unlock()
	if w.at.Before(start.Add(e.ttl)) {
		t.Fatalf("the writer got the key %v after the long reader's RLock was called, before its lease of %v ended",
			w.at.Sub(start), e.ttl)
	}
	if d, ok := r1.Context().Deadline(); !ok || !d.Before(w.at) {
		t.Fatalf("the long reader's lease context has deadline %v (%v), want one before the writer got the key (%v after the RLock)",
			d.Sub(start), ok, w.at.Sub(start))
	}
	if e.sync && !w.lost {
		t.Fatal("the long reader's lease context was still live when the writer got the key")
	}
	endsLost(e, r1, w.at, "the long reader's lease context was still live when the writer got the key")
	if err := r1.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Unlock of the long reader's expired lease = %v, want ErrNotHeld", err)
	}
}
