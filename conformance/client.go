package conformance

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// client runs one subtest per property of a Client on the backend.
func (s *suite) client(t *testing.T) {
	s.properties(t, []property{
		{"Reentry", reentry},
		{"ReentryResetsLease", reentryResetsLease},
		{"ReentryAfterLoss", reentryAfterLoss},
		{"HeldOwner", heldOwner},
		{"WaitCtxBoundsWaitOnly", waitCtxBoundsWaitOnly},
		{"ForeignOwnerRefused", foreignOwnerRefused},
		{"DoubleUnlock", doubleUnlock},
		{"WatchdogKeepsAlive", watchdogKeepsAlive},
		{"RenewalsBatched", renewalsBatched},
		{"RenewalCadence", renewalCadence},
		{"ExpiryWithoutRenewal", expiryWithoutRenewal},
		{"LostLease", lostLease},
		{"FailingRenewalsEndLease", failingRenewalsEndLease},
		{"Notices", notices},
		{"NoticeWakesWaiter", noticeWakesWaiter},
		{"ForceUnlockWakesWaiter", forceUnlockWakesWaiter},
		{"LocalQueue", localQueue},
		{"HandOff", handOff},
		{"WaitBounded", waitBounded},
		{"RetryPerCall", retryPerCall},
		{"Unavailable", unavailable},
		{"InvalidInput", invalidInput},
		{"KeyPrefix", keyPrefix},
		{"Close", closeEndsLeases},
		{"Fencing", fencing},
		{"NoOrphanedHold", noOrphanedHold},
		{"LostAcquireReply", lostAcquireReply},
		{"LostReleaseReply", lostReleaseReply},
		{"InspectOwner", inspectOwner},
		{"NotALock", notALock},
	})
}

// ok returns v, failing the test on err: ok(c.Lock(ctx, key))(t).
func ok[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func inspect(e *env, key string) locker.State {
	e.t.Helper()
	return ok(e.probe.faults.Inspect(background(e.t), key))(e.t)
}

// Re-entry through the lease's context (and contexts derived from it) adds holds; every Unlock
// releases one and ends its own lease's context only; the lock is free after the last.
func reentry(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("reentry")
	outer := ok(c.Lock(ctx, key))(t)
	derived, cancel := context.WithCancel(outer.Context())
	defer cancel()
	middle := ok(c.Lock(derived, key))(t)
	inner := ok(c.TryLock(middle.Context(), key))(t)
	if outer.Holds() != 1 || middle.Holds() != 2 || inner.Holds() != 3 || inner.Key() != key {
		t.Fatalf("holds %d, %d, %d; want 1, 2, 3", outer.Holds(), middle.Holds(), inner.Holds())
	}
	if st := inspect(e, key); !st.Locked || st.Holds != 3 {
		t.Fatalf("after three locks: %+v, want 3 holds", st)
	}
	if err := middle.Unlock(); err != nil {
		t.Fatalf("Unlock of the middle hold: %v", err)
	}
	if middle.Context().Err() == nil || inner.Context().Err() != nil || outer.Context().Err() != nil {
		t.Fatal("Unlock must end the context of its own lease, and only that one: the others still hold")
	}
	if err := inner.Unlock(); err != nil {
		t.Fatalf("Unlock of the inner hold: %v", err)
	}
	if st := inspect(e, key); !st.Locked || st.Holds != 1 {
		t.Fatalf("after two unlocks: %+v, want 1 hold", st)
	}
	if err := outer.Unlock(); err != nil {
		t.Fatal(err)
	}
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after the last unlock: %+v, want free", st)
	}
}

// Re-entry resets the lease to the new TTL.
func reentryResetsLease(e *env) {
	t, c, ctx, key := e.t, e.client(locker.WithoutRenewal()), background(e.t), e.key("reset")
	outer := ok(c.Lock(ctx, key))(t)
	defer outer.Unlock()
	time.Sleep(e.ttl / 2)
	inner := ok(c.Lock(outer.Context(), key))(t)
	defer inner.Unlock()
	if st := inspect(e, key); st.TTL < e.ttl*3/4 {
		t.Fatalf("after re-entry half-way through the lease, %v remain, want about %v", st.TTL, e.ttl)
	}
}

// A different owner is refused while any hold exists, and told the holder's remaining lease.
func foreignOwnerRefused(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("foreign")
	held := ok(c.Lock(ctx, key))(t)
	defer held.Unlock()
	for _, other := range []*locker.Client{c, e.client()} {
		l, err := other.TryLock(ctx, key)
		var refused *locker.NotObtainedError
		if !errors.As(err, &refused) || !errors.Is(err, locker.ErrNotObtained) {
			l.Unlock()
			t.Fatalf("TryLock by another owner = %v, want a *NotObtainedError", err)
		}
		if refused.TTL <= 0 || refused.TTL > e.ttl || refused.Key != key {
			t.Fatalf("refusal %+v: want the key and the holder's lease in (0, %v]", refused, e.ttl)
		}
	}
}

// A second Unlock of a Lease returns ErrNotHeld without a call to the backend.
func doubleUnlock(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("double")
	l := ok(c.Lock(ctx, key))(t)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	before := e.probe.total("")
	if err := l.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
	if n := e.probe.total(""); n != before {
		t.Fatalf("second Unlock made %d backend calls, want none", n-before)
	}
	var nilLease *locker.Lease
	if err := nilLease.Unlock(); !errors.Is(err, locker.ErrNotHeld) || nilLease.Context().Err() == nil {
		t.Fatalf("nil Lease: Unlock = %v, want ErrNotHeld and an ended context", err)
	}
}

// The watchdog keeps a lease alive for four TTLs and stops renewing it after Unlock (a renewal
// already under way as Unlock runs may still go out: one at most).
func watchdogKeepsAlive(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("watchdog")
	l := ok(c.Lock(ctx, key))(t)
	for range 8 {
		time.Sleep(e.ttl / 2)
		if err := context.Cause(l.Context()); err != nil {
			t.Fatalf("lease context ended while renewed: %v", err)
		}
	}
	if st := inspect(e, key); !st.Locked || st.Holds != 1 {
		t.Fatalf("after 4 TTLs with the watchdog: %+v, want held", st)
	}
	if _, err := e.client().TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("TryLock by another owner after 4 TTLs = %v, want ErrNotObtained", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	renewals := e.probe.total("Renew")
	time.Sleep(2 * e.ttl)
	if n := e.probe.total("Renew"); n > renewals+1 {
		t.Fatalf("%d renewals after Unlock, want none (but one under way)", n-renewals)
	}
}

// Leases taken together are renewed together: one Renew call per tick carries all of them.
// (Leases taken more than a sixth of a TTL apart, as on a loaded machine, may form two groups.)
func renewalsBatched(e *env) {
	t, c, ctx := e.t, e.client(), background(e.t)
	const n = 20
	start := time.Now()
	for i := range n {
		l := ok(c.Lock(ctx, e.key(string(rune('a'+i)))))(t)
		defer l.Unlock()
	}
	groups := 1
	if spread := time.Since(start); spread >= e.ttl/6 {
		groups = 2
		t.Logf("taking the %d locks took %v: up to two Renew calls per tick", n, spread)
	}
	time.Sleep(2 * e.ttl)
	batches := e.probe.faults.renewBatches()
	renewed := 0
	for _, b := range batches {
		renewed += b
	}
	if len(batches) == 0 || len(batches) > 8*groups || renewed < 4*n {
		t.Fatalf("%d Renew calls in 2 TTLs (batches %v), want one per third of a TTL carrying every lease", len(batches), batches)
	}
	for _, b := range batches {
		if b != n && groups == 1 {
			t.Fatalf("Renew batch sizes %v, want all %d leases in every call", batches, n)
		}
	}
}

// A fixed lease is held until its TTL, not less, and free after it; its context ends before.
func expiryWithoutRenewal(e *env) {
	t, c, ctx, key := e.t, e.client(locker.WithoutRenewal()), background(e.t), e.key("fixed")
	start := time.Now()
	l := ok(c.Lock(ctx, key))(t)
	acquired := time.Now()
	if d, ok := l.Context().Deadline(); !ok || d.After(start.Add(e.ttl)) || d.Before(start.Add(e.ttl*9/10)) {
		t.Fatalf("fixed lease: Deadline() = %v, %v, want just under the TTL", d.Sub(start), ok)
	}
	ended := endTime(l)
	time.Sleep(time.Until(start.Add(e.ttl / 2)))
	if at, ok := ended(); ok && at.Before(start.Add(e.ttl/2)) {
		t.Fatalf("a fixed lease's context ended after %v, half-way through the lease", at.Sub(start))
	}
	slack := time.Nanosecond
	if !e.sync {
		slack = e.ttl / 20
	}
	time.Sleep(time.Until(start.Add(e.ttl - slack)))
	// The backend's lease began after start: a reply before start+TTL must show the lock (a
	// later one, on a loaded machine, proves nothing).
	if st := inspect(e, key); !st.Locked && time.Now().Before(start.Add(e.ttl-time.Millisecond)) {
		t.Fatal("a fixed lease expired before its TTL")
	}
	endsLost(e, l, acquired.Add(e.ttl), "a fixed lease's context was still live at its TTL")
	if e.probe.total("Renew") != 0 {
		t.Fatal("a fixed lease was renewed")
	}
	time.Sleep(time.Until(acquired.Add(e.ttl + slack)))
	other := ok(e.client().TryLock(ctx, key))(t)
	defer other.Unlock()
	if err := l.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Unlock of an expired lease = %v, want ErrNotHeld", err)
	}
}

// endTime watches l's context: the function it returns reports when the context ended, if it
// has. (A test that sleeps and then checks the context could be late on a loaded machine.)
func endTime(l *locker.Lease) func() (time.Time, bool) {
	var (
		mu sync.Mutex
		at time.Time
	)
	stop := context.AfterFunc(l.Context(), func() {
		mu.Lock()
		at = time.Now()
		mu.Unlock()
	})
	return func() (time.Time, bool) {
		if l.Context().Err() == nil {
			return time.Time{}, false
		}
		stop()
		for range 1000 { // the AfterFunc runs at once once the context ended
			mu.Lock()
			t := at
			mu.Unlock()
			if !t.IsZero() {
				return t, true
			}
			runtime.Gosched()
		}
		return time.Now(), true
	}
}

// endsLost fails the test unless l's context ends by deadline (in real time: by deadline and
// schedulingSlack) with cause ErrLockLost.
func endsLost(e *env, l *locker.Lease, deadline time.Time, late string) {
	e.t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(time.Until(deadline)):
		if l.Context().Err() != nil {
			break // it had ended: a deadline in the past makes both cases ready at once
		}
		// In a synctest bubble time is exact, so the deadline is the bound. In real time the
		// watchdog's timer, like this one, may run late on a loaded machine; the Client decided
		// in time if the context ends within schedulingSlack (which the bubble runs check).
		if e.sync {
			e.t.Fatal(late)
		}
		select {
		case <-l.Context().Done():
			e.t.Logf("the lease context ended %v after the deadline (scheduling on a loaded machine)", time.Since(deadline).Round(time.Millisecond))
		case <-time.After(schedulingSlack):
			e.t.Fatalf("%s (and for %v after)", late, schedulingSlack)
		}
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
		e.t.Fatalf("the lease context's cause is %v, want ErrLockLost", cause)
	}
}

// schedulingSlack is how late a real-time run lets a timer be on a loaded machine (two
// race-enabled test runs at once on 2 cores); the runs log how late they saw it.
const schedulingSlack = 250 * time.Millisecond

// When the watchdog finds the hold gone, the lease context ends with ErrLockLost, and Unlock
// reports ErrNotHeld.
func lostLease(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("lost")
	l := ok(c.Lock(ctx, key))(t)
	if !ok(e.probe.faults.ForceRelease(ctx, key))(t) {
		t.Fatal("ForceRelease of a held key reported no lock")
	}
	endsLost(e, l, time.Now().Add(e.ttl), "the lease context did not end within a TTL of the hold's loss")
	if err := l.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease = %v, want ErrNotHeld", err)
	}
}

// When renewals fail, the lease context ends before the lease may have expired on the backend.
func failingRenewalsEndLease(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("partition")
	e.probe.faults.setFailRenew(true)
	start := time.Now()
	l := ok(c.Lock(ctx, key))(t)
	acquired := time.Now() // the acquire was sent before: its lease ends by acquired+TTL
	defer l.Unlock()
	ended := endTime(l)
	time.Sleep(e.ttl / 2)
	if at, ok := ended(); ok && at.Before(start.Add(e.ttl/2)) {
		t.Fatalf("the lease context ended after %v, half-way through the lease", at.Sub(start))
	}
	endsLost(e, l, acquired.Add(e.ttl), "renewals failed, yet the lease context was still live when the lease may have expired")
	if e.probe.total("Renew") < 2 {
		t.Fatalf("%d renewal attempts, want the watchdog to retry", e.probe.total("Renew"))
	}
	if e.sync && !inspect(e, key).Locked {
		t.Fatal("the backend lost the lease before the lease context ended")
	}
}

// skipWithoutNotices skips a property that needs release notices when the backend has none.
func skipWithoutNotices(e *env, key string) {
	_, cancel, err := e.probe.faults.Subscribe(background(e.t), key)
	if errors.Is(err, errors.ErrUnsupported) {
		e.t.Skip("the backend has no release notices")
	}
	if err != nil {
		e.t.Fatalf("Subscribe: %v", err)
	}
	cancel()
}

// A subscriber is notified after a release to zero and after a forced release.
func notices(e *env) {
	t, ctx, b, key := e.t, background(e.t), e.probe.faults, e.key("notices")
	skipWithoutNotices(e, key)
	ch, cancel, err := b.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	expect := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(e.ttl):
			t.Fatalf("no notice within a TTL after %s", what)
		}
	}
	ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "a", TTL: e.ttl}))(t)
	ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "a", TTL: e.ttl}))(t)
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "a"}))(t)
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "a"}))(t)
	expect("the release to zero")
	ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "b", TTL: e.ttl}))(t)
	ok(b.ForceRelease(ctx, key))(t)
	expect("a forced release")
	cancel()
	cancel() // twice is fine
}

// waitForRefusal waits until the probe has seen n refusals on key, the sign that a waiter has
// subscribed and is waiting.
func waitForRefusal(e *env, refusals <-chan string, key string, n int) {
	e.t.Helper()
	timeout := time.After(10 * e.ttl)
	for n > 0 {
		select {
		case k := <-refusals:
			if k == key {
				n--
			}
		case <-timeout:
			e.t.Fatal("the waiter did not try the lock")
		}
	}
	e.settle()
}

// A waiter whose fallback timers are far away acquires at once after Unlock: only the release
// notice can have woken it.
func noticeWakesWaiter(e *env) {
	wakesWaiter(e, "notice", func(holder *locker.Lease, _ *locker.Client) {
		if err := holder.Unlock(); err != nil {
			e.t.Fatal(err)
		}
	})
}

// ForceUnlock wakes waiters the same way.
func forceUnlockWakesWaiter(e *env) {
	wakesWaiter(e, "force", func(_ *locker.Lease, c *locker.Client) {
		if !ok(c.ForceUnlock(background(e.t), e.key("force")))(e.t) {
			e.t.Fatal("ForceUnlock of a held key reported no lock")
		}
	})
}

func wakesWaiter(e *env, name string, release func(holder *locker.Lease, c *locker.Client)) {
	t, ctx, key := e.t, background(e.t), e.key(name)
	skipWithoutNotices(e, key)
	refusals := e.probe.faults.watchRefusals()
	c := e.client(locker.WithTTL(10 * e.ttl)) // the holder's lease bounds the waiter's timer
	holder := ok(c.Lock(ctx, key))(t)
	got := make(chan error, 1)
	var acquired time.Time
	go func() {
		// A long lease for the waiter too: on a KindLocker its Lock refreshes its queue entry
		// every third of its TTL, a timer that must not wake it either.
		l, err := e.client(locker.WithTTL(10*e.ttl)).Lock(ctx, key, locker.WithRetry(locker.LinearBackoff(time.Hour)))
		acquired = time.Now()
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	waitForRefusal(e, refusals, key, 2) // before and after subscribing
	released := time.Now()
	release(holder, c)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(e.ttl):
		t.Fatal("the waiter was not woken within a TTL of the release")
	}
	if d := acquired.Sub(released); d > e.ttl/2 {
		t.Fatalf("the waiter took %v after the release, want well under a TTL", d)
	}
}

// Lock calls of one Client on one key queue locally: a waiter behind a holder of the same
// Client gets the lock when the holder unlocks, and also when the holder's lease is lost
// without an Unlock; a bounded strategy still gives up; TryLock does not wait in the queue.
func localQueue(e *env) {
	t, c, ctx, key := e.t, e.client(), background(e.t), e.key("queue")
	first := ok(c.Lock(ctx, key))(t)
	got := make(chan leaseOrError, 1)
	lock := func() {
		l, err := c.Lock(ctx, key)
		got <- leaseOrError{l, err}
	}
	go lock()
	e.settle()
	if _, err := c.Lock(ctx, key, locker.WithRetry(locker.LimitRetry(locker.LinearBackoff(e.ttl/20), 1))); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("a Lock with one retry behind a local holder = %v, want ErrNotObtained", err)
	}
	if _, err := c.TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("TryLock of a locally held key = %v, want ErrNotObtained", err)
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	var second *locker.Lease
	select {
	case r := <-got:
		second = r.get(t, "the queued Lock")
	case <-time.After(e.ttl):
		t.Fatal("the queued Lock did not get the lock within a TTL of the Unlock")
	}

	// Now lose the second lease behind the Client's back: the next in line must not starve.
	go lock()
	e.settle()
	ok(e.probe.faults.ForceRelease(ctx, key))(t)
	select {
	case r := <-got:
		ok(0, r.get(t, "the queued Lock after a loss").Unlock())(t)
	case <-time.After(2 * e.ttl):
		t.Fatal("the queued Lock starved after the holder's lease was lost")
	}
	if cause := context.Cause(second.Context()); !errors.Is(cause, locker.ErrLockLost) {
		t.Fatalf("the forced-away lease's cause = %v, want ErrLockLost", cause)
	}
}

// Lock gives up when its ctx ends (wrapping ErrNotObtained and the ctx error) or when the retry
// strategy runs out (ErrNotObtained alone).
func waitBounded(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("bounded")
	holder := ok(e.client().Lock(ctx, key))(t)
	defer holder.Unlock()
	c := e.client()

	start := time.Now() // before the deadline is set: a pause between the two must not count
	short, cancel := context.WithTimeout(ctx, e.ttl/4)
	defer cancel()
	_, err := c.Lock(short, key)
	if !errors.Is(err, locker.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an ending ctx = %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	if d := time.Since(start); d < e.ttl/4 || d > e.ttl {
		t.Fatalf("Lock gave up after %v, want the ctx's %v", d, e.ttl/4)
	}

	// A key of its own, that nothing else wakes: the Lock that gave up above may still be
	// taking its queue entry out in the background, and the notice of that (a free attempt, see
	// RetryPerCall) would add to the count.
	key = e.key("bounded-retries")
	other := ok(e.client().Lock(ctx, key))(t)
	defer other.Unlock()
	before := e.probe.total("Acquire")
	_, err = c.Lock(ctx, key, locker.WithRetry(locker.LimitRetry(locker.LinearBackoff(e.ttl/20), 2)))
	if !errors.Is(err, locker.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with 2 retries = %v, want ErrNotObtained alone", err)
	}
	if n := e.probe.total("Acquire") - before; n < 3 || n > 4 {
		t.Fatalf("Lock with 2 retries made %d attempts, want 3 (4 with the one after subscribing)", n)
	}
	// Acquire and Subscribe calls only: the Lock that gave up above may still be taking its
	// queue entry out (or its acquire back) in the background.
	calls := func() int { return e.probe.total("Acquire") + e.probe.total("Subscribe") }
	before = calls()
	if _, err := c.Lock(ctx, key, locker.WithRetry(locker.NoRetry())); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("Lock with NoRetry = %v, want ErrNotObtained", err)
	}
	if n := calls() - before; n != 1 {
		t.Fatalf("Lock with NoRetry made %d backend calls, want one attempt and no subscription", n)
	}
}

// A retry strategy counts each call's own retries: one LimitRetry(LinearBackoff(d), 3) value
// shared by eight Lock calls, four on each of two Clients, started d/4 apart behind a holder
// that keeps the key, gives every call the sum of its backoffs, 3d, and not much more, whatever
// wakes it: the others' refusals, queue entries, give-ups and notices, or its local turn.
func retryPerCall(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("retry-per-call")
	holder := ok(e.client(locker.WithTTL(10*e.ttl)).Lock(ctx, key))(t)
	defer holder.Unlock()
	const retries, clients, perClient = 3, 2, 4
	d := e.ttl / 50
	shared := locker.LimitRetry(locker.LinearBackoff(d), retries)
	cs := []*locker.Client{e.client(), e.client()}
	took := make([]time.Duration, clients*perClient)
	errs := make([]error, clients*perClient)
	e.probe.faults.takeLongest()
	var wg sync.WaitGroup
	for i := range took {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * d / 4)
			start := time.Now()
			l, err := cs[i%clients].Lock(ctx, key, locker.WithRetry(shared))
			took[i], errs[i] = time.Since(start), err
			if err == nil {
				l.Unlock()
			}
		})
	}
	wg.Wait()
	// In a bubble each call ends when its last backoff does. In real time the round trips of a
	// call's attempts and subscription (up to 6 in line) add to its waits, and a loaded machine
	// runs timers late: with the whole suite and six race-enabled runs of this property at once
	// on 2 cores, calls gave up up to 200ms later than 3d and their round trips explain; once, on
	// a Sentinel's go-redis, all 8 after 2.9s: the bound grows with the longest round trip seen.
	slack := d / 4
	if longest := e.probe.faults.takeLongest(); !e.sync {
		slack = e.ttl/2 + (retries+3)*longest
		t.Logf("the longest attempt or subscription took %v", longest)
	}
	for i, err := range errs {
		if !errors.Is(err, locker.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call %d (Client %d): Lock = %v, want ErrNotObtained alone", i, i%clients, err)
		}
		if took[i] < retries*d || took[i] > retries*d+slack {
			t.Errorf("call %d (Client %d) gave up after %v, want %v (its %d backoffs of %v), and at most %v more", i, i%clients, took[i], retries*d, retries, d, slack)
		}
	}
	t.Logf("gave up after %v", took)
}

// Invalid arguments give ErrInvalid (or the ctx's error) and never reach the backend.
func invalidInput(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("invalid")
	c := e.client()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var nilCtx context.Context
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key", func() error { _, err := c.Lock(ctx, ""); return err }, locker.ErrInvalid},
		{"key too long", func() error { _, err := c.TryLock(ctx, string(make([]byte, locker.MaxKeyLen+1))); return err }, locker.ErrInvalid},
		{"TTL 0", func() error { _, err := c.Lock(ctx, key, locker.WithTTL(0)); return err }, locker.ErrInvalid},
		{"TTL under 1ms", func() error { _, err := c.Lock(ctx, key, locker.WithTTL(time.Millisecond-1)); return err }, locker.ErrInvalid},
		{"negative TTL", func() error { _, err := c.TryLock(ctx, key, locker.WithTTL(-time.Second)); return err }, locker.ErrInvalid},
		{"nil ctx", func() error { _, err := c.Lock(nilCtx, key); return err }, locker.ErrInvalid},
		{"cancelled ctx", func() error { _, err := c.Lock(cancelled, key); return err }, context.Canceled},
		{"empty owner", func() error { _, err := c.Lock(ctx, key, locker.WithOwner("")); return err }, locker.ErrInvalid},
		{"owner too long", func() error {
			_, err := c.Lock(ctx, key, locker.WithOwner(string(make([]byte, locker.MaxOwnerLen+1))))
			return err
		}, locker.ErrInvalid},
		{"nil retry", func() error { _, err := c.Lock(ctx, key, locker.WithRetry(nil)); return err }, locker.ErrInvalid},
		{"bad backoff", func() error {
			_, err := c.Lock(ctx, key, locker.WithRetry(locker.ExponentialBackoff(time.Second, time.Millisecond)))
			return err
		}, locker.ErrInvalid},
		{"bad limit", func() error {
			_, err := c.Lock(ctx, key, locker.WithRetry(locker.LimitRetry(locker.NoRetry(), -1)))
			return err
		}, locker.ErrInvalid},
		{"nil option", func() error { _, err := c.Lock(ctx, key, nil); return err }, locker.ErrInvalid},
		{"nil backend", func() error { _, err := locker.New(nil).Lock(ctx, key); return err }, locker.ErrInvalid},
		{"invalid client default", func() error {
			_, err := locker.New(e.probe, locker.WithTTL(0)).TryLock(ctx, key)
			return err
		}, locker.ErrInvalid},
		{"Inspect empty key", func() error { _, err := c.Inspect(ctx, ""); return err }, locker.ErrInvalid},
		{"Inspect nil ctx", func() error { _, err := c.Inspect(nilCtx, key); return err }, locker.ErrInvalid},
		{"ForceUnlock empty key", func() error { _, err := c.ForceUnlock(ctx, ""); return err }, locker.ErrInvalid},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want an error wrapping %v", tc.name, err, tc.want)
		}
	}
	if n := e.probe.total(""); n != 0 {
		t.Fatalf("invalid calls made %d backend calls, want none", n)
	}
}

// WithKeyPrefix namespaces keys on the backend; per call it replaces the Client's prefix.
// Re-entry under a prefix finds the hold (it does not wait for itself).
func keyPrefix(e *env) {
	t, ctx := e.t, background(e.t)
	c := e.client(locker.WithKeyPrefix(e.key("p1:")))
	l := ok(c.Lock(ctx, "k"))(t)
	defer l.Unlock()
	if !inspect(e, e.key("p1:k")).Locked || inspect(e, "k").Locked {
		t.Fatal("the backend must see the prefixed key only")
	}
	if st := ok(c.Inspect(ctx, "k"))(t); !st.Locked {
		t.Fatal("Client.Inspect must apply the prefix")
	}
	l2 := ok(c.Lock(ctx, "k", locker.WithKeyPrefix(e.key("p2:"))))(t)
	defer l2.Unlock()
	if !inspect(e, e.key("p2:k")).Locked {
		t.Fatal("a per-call prefix must replace the Client's")
	}
	for _, r := range []struct {
		outer *locker.Lease
		opts  []locker.Option
	}{{l, nil}, {l2, []locker.Option{locker.WithKeyPrefix(e.key("p2:"))}}} {
		within, cancel := context.WithTimeout(r.outer.Context(), e.ttl) // a wait fails, not hangs
		inner, err := c.Lock(within, "k", r.opts...)
		cancel()
		if err != nil || inner.Holds() != 2 {
			t.Fatalf("re-entry under a key prefix: %v, holds %d; want a re-entry at once", err, inner.Holds())
		}
		ok(0, inner.Unlock())(t)
	}
}

// Close ends every lease context with ErrClosed, wakes waiting Locks, stops renewals, and later
// calls return ErrClosed; Unlock still releases.
func closeEndsLeases(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("close")
	own := newProbe(e.probe) // counts this Client's calls only
	c := locker.New(own, locker.WithTTL(e.ttl))
	l := ok(c.Lock(ctx, key))(t)
	holder := ok(e.client().Lock(ctx, e.key("other")))(t)
	defer holder.Unlock()
	waiting := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, e.key("other"), locker.WithRetry(locker.LinearBackoff(time.Hour)))
		waiting <- err
	}()
	e.settle()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrClosed) {
		t.Fatalf("lease context cause after Close = %v, want ErrClosed", cause)
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("a waiting Lock returned %v on Close, want ErrClosed", err)
		}
	case <-time.After(e.ttl):
		t.Fatal("a waiting Lock did not return on Close")
	}
	if _, err := c.Lock(ctx, e.key("after")); !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Lock after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Inspect(ctx, key); !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Inspect after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	renewals := own.total("Renew")
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock after Close = %v, want the lock released", err)
	}
	if inspect(e, key).Locked {
		t.Fatal("Unlock after Close left the key locked")
	}
	time.Sleep(e.ttl)
	if n := own.total("Renew") - renewals; n > 0 {
		t.Fatalf("%d renewals after Close", n)
	}
}
