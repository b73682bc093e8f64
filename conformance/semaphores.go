package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// semaphores runs the properties of semaphores: on a locker.Semaphorer, the state machine of
// permits ("Model") and one subtest per Client property; on any other backend, Unsupported
// alone.
func (s *suite) semaphores(t *testing.T) {
	sem := false
	s.inCase(t, func(e *env) { _, sem = e.probe.faults.Locker.(locker.Semaphorer) })
	if !sem {
		t.Run("Unsupported", func(t *testing.T) { s.inCase(t, semaphoresUnsupported) })
		t.Skip("the backend is no locker.Semaphorer: no semaphores to check")
	}
	t.Run("Model", func(t *testing.T) { s.check(t, permitHolds) })
	s.properties(t, []property{
		{"Exclusion", permitExclusion},
		{"TryAcquire", tryAcquire},
		{"LimitMismatch", limitMismatch},
		{"Reentry", permitReentry},
		{"PermitLeases", permitLeases},
		{"CrashedHolder", crashedHolder},
		{"FairOrder", permitFairOrder},
		{"Fencing", permitFencing},
		{"NoticeWakesWaiter", permitNoticeWakesWaiter},
		{"HandOff", permitHandOff},
		{"Grants", permitGrants},
	})
}

// On a backend that is no Semaphorer, Acquire and TryAcquire return an error wrapping
// errors.ErrUnsupported without a call to the backend.
func semaphoresUnsupported(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("unsupported"), e.client()
	if _, err := c.Acquire(ctx, key, 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Acquire on a backend that is no Semaphorer = %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if _, err := c.TryAcquire(ctx, key, 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryAcquire on a backend that is no Semaphorer = %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if n := e.probe.total(""); n != 0 {
		t.Fatalf("the unsupported calls made %d backend calls, want none", n)
	}
}

// permitExclusion: 8 goroutines on 4 Clients (half of them fair) take permits of a semaphore of
// 3, many times each, and hold them a while: never more than 3 are inside at once, 3 are at
// times, and every call gets in.
func permitExclusion(e *env) {
	const n, clients, perClient, rounds = 3, 4, 2, 8
	t, ctx, key := e.t, background(e.t), e.key("permit-exclusion")
	var (
		inside, most atomic.Int32
		wg           sync.WaitGroup
		fail         = make(chan error, clients*perClient)
	)
	retry := locker.WithRetry(locker.LinearBackoff(e.ttl / 50))
	for i := range clients {
		opts := []locker.Option{retry}
		if i%2 == 1 {
			opts = append(opts, locker.WithFair())
		}
		c := e.client()
		for range perClient {
			wg.Go(func() {
				for range rounds {
					l, err := c.Acquire(ctx, key, n, opts...)
					if err != nil {
						fail <- err
						return
					}
					k := inside.Add(1)
					raise(&most, k)
					if k > n {
						t.Errorf("%d holders inside a semaphore of %d", k, n)
					}
					time.Sleep(e.ttl / 100) // the work: every goroutine that can get in does meanwhile
					inside.Add(-1)
					if err := l.Unlock(); err != nil {
						fail <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if most.Load() < n {
		t.Fatalf("at most %d holders inside at once, want %d: the permits were not all used", most.Load(), n)
	}
}

// TryAcquire takes permits while one is free; refused, it reports the permits taken and the
// soonest of their leases; Inspect shows the limit and every holder; an Unlock frees a permit.
func tryAcquire(e *env) {
	const n = 2
	t, ctx, key := e.t, background(e.t), e.key("try-acquire")
	a, b := e.client(), e.client(locker.WithTTL(2*e.ttl))
	first := ok(a.TryAcquire(ctx, key, n))(t)
	second := ok(b.TryAcquire(ctx, key, n))(t)
	for i, l := range []*locker.Lease{first, second} {
		if l.Holds() != 1 || l.Limit() != n || l.Shared() || l.Key() != key {
			t.Fatalf("permit %d: holds %d, limit %d, shared %v, key %q; want one hold of a permit of %d", i, l.Holds(), l.Limit(), l.Shared(), l.Key(), n)
		}
	}
	if first.Owner() == second.Owner() {
		t.Fatal("two permits with one owner token")
	}
	l, err := e.client().TryAcquire(ctx, key, n)
	var refused *locker.NotObtainedError
	if !errors.As(err, &refused) || !errors.Is(err, locker.ErrNotObtained) {
		if err == nil {
			_ = l.Unlock()
		}
		t.Fatalf("TryAcquire with every permit taken = %v, want a *NotObtainedError", err)
	}
	if refused.Key != key || refused.Limit != n || refused.Taken != n || refused.TTL <= 0 || refused.TTL > e.ttl {
		t.Fatalf("refusal %+v: want the key, Limit %d, Taken %d and the soonest lease in (0, %v] (the shorter permit's)", refused, n, n, e.ttl)
	}
	st := inspect(e, key)
	if !st.Locked || st.Limit != n || st.Shared || st.Readers != 0 || st.Holds != n || len(st.Holders) != n || st.TTL <= e.ttl {
		t.Fatalf("Locker.Inspect of a semaphore with %d permits taken: %+v; want Limit %d, %d holders, TTL the longest lease", n, st, n, n)
	}
	for _, h := range st.Holders {
		if (h.Owner != first.Owner() && h.Owner != second.Owner()) || h.Holds != 1 || h.TTL <= 0 {
			t.Fatalf("holder %+v: want one of the two permits, one hold, a lease left", h)
		}
	}
	if cst := ok(a.Inspect(ctx, key))(t); cst.Limit != n || len(cst.Holders) != n {
		t.Fatalf("Client.Inspect: %+v, want Limit %d and %d holders", cst, n, n)
	}
	ok(0, first.Unlock())(t)
	third := ok(e.client().TryAcquire(ctx, key, n))(t) // the freed permit
	ok(0, second.Unlock())(t)
	ok(0, third.Unlock())(t)
	if st := inspect(e, key); !freeState(st) {
		t.Fatalf("after every permit was given back: %+v, want the key free", st)
	}
}

// A call with another limit than the key's, or of the other kind, fails at once with
// ErrLimitMismatch and changes nothing; once every permit is given back, the key takes a new
// limit. An n below 1 or over the backend's MaxLimit is refused before any call.
func limitMismatch(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("limit-mismatch"), e.client()
	held := ok(c.Acquire(ctx, key, 2))(t)
	acquires := e.probe.total("Acquire")
	within, cancel := context.WithTimeout(ctx, e.ttl) // fails at once, or at the timeout
	defer cancel()
	retry := locker.WithRetry(locker.LinearBackoff(e.ttl / 20))
	calls := map[string]func() (*locker.Lease, error){
		"Acquire(3)":    func() (*locker.Lease, error) { return e.client().Acquire(within, key, 3, retry) },
		"TryAcquire(1)": func() (*locker.Lease, error) { return e.client().TryAcquire(within, key, 1) },
		"Lock":          func() (*locker.Lease, error) { return e.client().Lock(within, key, retry) },
		"TryRLock":      func() (*locker.Lease, error) { return e.client().TryRLock(within, key) },
		"Lock through the permit's context": func() (*locker.Lease, error) {
			ctx, cancel := context.WithTimeout(held.Context(), e.ttl)
			defer cancel()
			return c.Lock(ctx, key, retry)
		},
	}
	for name, call := range calls {
		if l, err := call(); !errors.Is(err, locker.ErrLimitMismatch) {
			if err == nil {
				_ = l.Unlock()
			}
			t.Fatalf("%s on a semaphore of 2 = %v, want ErrLimitMismatch", name, err)
		}
	}
	if d := e.probe.total("Acquire") - acquires; d > len(calls) {
		t.Fatalf("the mismatched calls made %d Acquire calls, want one each: no retry", d)
	}
	if st := inspect(e, key); st.Limit != 2 || len(st.Holders) != 1 || st.Holders[0].Owner != held.Owner() || st.Queued != 0 {
		t.Fatalf("after the mismatched calls: %+v, want the one permit, nothing queued", st)
	}
	if held.Context().Err() != nil {
		t.Fatal("a mismatched call ended the permit's lease")
	}
	lock := ok(c.Lock(ctx, e.key("limit-mismatch-lock")))(t)
	if _, err := c.Acquire(within, lock.Key(), 2); !errors.Is(err, locker.ErrLimitMismatch) {
		t.Fatalf("Acquire on a key held as a lock = %v, want ErrLimitMismatch", err)
	}
	ok(0, lock.Unlock())(t)
	ok(0, held.Unlock())(t)
	again := ok(c.TryAcquire(ctx, key, 3))(t) // the key is free: a new limit
	if st := inspect(e, key); st.Limit != 3 {
		t.Fatalf("a semaphore taken anew with 3 permits: %+v, want Limit 3", st)
	}
	ok(0, again.Unlock())(t)
	before := e.probe.total("")
	max := e.backend().(locker.Semaphorer).MaxLimit()
	for _, n := range []int{0, -1, max + 1} {
		if _, err := c.Acquire(ctx, key, n); !errors.Is(err, locker.ErrInvalid) {
			t.Fatalf("Acquire with n = %d: %v, want ErrInvalid", n, err)
		}
	}
	if d := e.probe.total("") - before; d != 0 {
		t.Fatalf("invalid limits made %d backend calls, want none", d)
	}
}

// Acquire through a permit's lease context re-enters that permit: one permit held twice, its
// owner's, which takes no second slot; Unlock gives back one hold at a time.
func permitReentry(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("permit-reentry"), e.client()
	outer := ok(c.Acquire(ctx, key, 2))(t)
	inner := ok(c.Acquire(outer.Context(), key, 2))(t)
	if inner.Holds() != 2 || inner.Owner() != outer.Owner() || inner.Limit() != 2 {
		t.Fatalf("Acquire through a permit's context: holds %d, same owner %v, limit %d; want its owner's second hold", inner.Holds(), inner.Owner() == outer.Owner(), inner.Limit())
	}
	other := ok(e.client().TryAcquire(ctx, key, 2))(t) // the second permit is still free
	l, err := e.client().TryAcquire(ctx, key, 2)
	expectRefused(t, "a third permit of 2", l, err)
	ok(0, inner.Unlock())(t)
	if outer.Context().Err() != nil {
		t.Fatal("the inner Unlock ended the outer permit's lease")
	}
	st := inspect(e, key)
	if len(st.Holders) != 2 || st.Holds != 2 {
		t.Fatalf("after the inner Unlock: %+v, want 2 permits of one hold each", st)
	}
	ok(0, outer.Unlock())(t)
	ok(0, other.Unlock())(t)
	if _, err := c.Acquire(outer.Context(), key, 2); !errors.Is(err, locker.ErrLockLost) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire through an unlocked permit's context = %v, want it refused", err)
	}
}

// Every permit keeps its own lease: a fixed one ends at its time (its context first, then its
// permit is free for another), whatever the renewals of the permit beside it; a lost permit
// frees its slot.
func permitLeases(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("permit-leases")
	short := e.ttl / 2
	renewed := ok(e.client().Acquire(ctx, key, 2))(t)
	defer renewed.Unlock()
	fixed := ok(e.client(locker.WithTTL(short), locker.WithoutRenewal()).Acquire(ctx, key, 2))(t)
	acquired := time.Now()
	endsLost(e, fixed, acquired.Add(short), "a fixed permit's context did not end at its lease's end")
	deadline := acquired.Add(short + e.ttl/4)
	var l *locker.Lease
	for l == nil {
		var err error
		if l, err = e.client().TryAcquire(ctx, key, 2); err != nil && time.Now().After(deadline) {
			t.Fatalf("the fixed permit's slot was not free within %v of its lease's end (the renewed permit beside it kept it?): %v", e.ttl/4, err)
		}
		if l == nil {
			time.Sleep(e.ttl / 50)
		}
	}
	defer l.Unlock()
	if renewed.Context().Err() != nil {
		t.Fatal("the renewed permit ended with the fixed one")
	}
	st := inspect(e, key)
	if len(st.Holders) != 2 {
		t.Fatalf("after the fixed permit's end and a new one: %+v, want 2 holders", st)
	}
	for _, h := range st.Holders {
		if h.Owner == fixed.Owner() {
			t.Fatalf("the fixed permit, past its lease, is still a holder: %+v", st)
		}
	}
	if err := fixed.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Unlock of the ended fixed permit = %v, want ErrNotHeld", err)
	}
}

// A holder that crashed (a permit taken at the Locker level, never renewed nor released) keeps
// its slot until its own lease ends, and not after: a Client's Acquire gets the slot then.
func crashedHolder(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("crashed-holder")
	lease := e.ttl / 2
	sent := time.Now()
	a := ok(e.probe.faults.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "crashed", TTL: lease, Limit: 1}))(t)
	if !a.Acquired() {
		t.Fatalf("a permit of a free semaphore was refused: %+v", a)
	}
	answered := time.Now()
	l, err := e.client().Acquire(ctx, key, 1, locker.WithRetry(locker.LinearBackoff(e.ttl/50)))
	got := time.Now()
	if err != nil {
		t.Fatalf("Acquire behind a crashed holder: %v", err)
	}
	defer l.Unlock()
	if got.Before(sent.Add(lease - 2*time.Millisecond)) {
		t.Fatalf("the slot was taken %v after the crashed holder's permit, before its lease of %v ended", got.Sub(sent), lease)
	}
	switch late := got.Sub(answered.Add(lease)); {
	case late > e.ttl/4+schedulingSlack:
		t.Fatalf("the slot was taken %v after the crashed holder's lease ended, want well within a TTL", late)
	case late > e.ttl/4:
		t.Logf("the slot was taken %v after the crashed holder's lease ended (scheduling on a loaded machine)", late)
	}
}

// Fair Acquire calls of separate Clients obtain permits in the order in which they asked, and a
// fair TryAcquire does not pass them. The first waiter is a slow process (an entry made at the
// Locker level, sent again only when the test says): while it is first, a permit stays free,
// whatever the Clients' waiters try when a holder unlocks.
func permitFairOrder(e *env) {
	const waiters = 3
	t, key, b := e.t, e.key("permit-fair-order"), e.kindProbe()
	ctx, cancel := context.WithCancel(background(t))
	defer cancel() // the waiters left give up
	queued, refusals := e.probe.faults.watchQueued(), e.probe.faults.watchRefusals()
	fair := locker.WithFair()
	holders := []*locker.Lease{ok(e.client().Acquire(ctx, key, 2, fair))(t), ok(e.client().Acquire(ctx, key, 2, fair))(t)}
	slow := locker.AcquireRequest{Key: key, Owner: "slow-first", TTL: e.ttl, Limit: 2, Fair: true, Wait: 10 * e.ttl}
	defer func() { _ = b.Dequeue(context.Background(), key, slow.Owner) }()
	seen := map[string]bool{}
	if a := ok(b.Acquire(ctx, slow))(t); a.Acquired() {
		t.Fatal("a permit was granted while every permit was taken")
	}
	waitQueued(e, queued, seen)
	type obtained struct {
		i     int
		lease *locker.Lease
		err   error
	}
	order := make(chan obtained, waiters)
	for i := range waiters {
		c := e.client(fair)
		go func() {
			l, err := c.Acquire(ctx, key, 2)
			order <- obtained{i, l, err}
		}()
		waitQueued(e, queued, seen) // joined the queue before the next one asks
	}
	if st := inspect(e, key); st.Queued != waiters+1 {
		t.Fatalf("%d fair waiters: %+v, want Queued %d", waiters+1, st, waiters+1)
	}
	next := func(want int) *locker.Lease {
		t.Helper()
		select {
		case o := <-order:
			if o.err != nil {
				t.Fatalf("fair waiter %d: %v", o.i, o.err)
			}
			if o.i != want {
				_ = o.lease.Unlock()
				t.Fatalf("fair waiter %d obtained a permit, want %d (the order they asked in)", o.i, want)
			}
			return o.lease
		case <-time.After(10 * e.ttl):
			t.Fatalf("fair waiter %d did not obtain a permit", want)
		}
		return nil
	}
	for len(refusals) > 0 {
		<-refusals
	}
	ok(0, holders[0].Unlock())(t) // a permit is free; the slow first waiter has not come back yet
	waitForRefusal(e, refusals, key, waiters)
	select {
	case o := <-order:
		t.Fatalf("fair waiter %d obtained a permit while the first in the queue was still waiting", o.i)
	default:
	}
	l, err := e.client(fair).TryAcquire(ctx, key, 2)
	expectRefused(t, "a fair TryAcquire of a free permit while fair waiters are queued", l, err)
	if a := ok(b.Acquire(ctx, slow))(t); !a.Acquired() {
		t.Fatalf("the first in the queue was refused (%+v) with a permit free", a)
	}
	ok(0, holders[1].Unlock())(t)
	w0 := next(0)
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: slow.Owner, Shared: true}))(t)
	w1 := next(1)
	ok(0, w0.Unlock())(t)
	w2 := next(2)
	ok(0, w1.Unlock())(t)
	ok(0, w2.Unlock())(t)
}

// With WithFencing every new permit draws a token larger than every earlier one of the key, and
// a re-entry of a permit reports that permit's own.
func permitFencing(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("permit-fencing")
	a, b := e.client(locker.WithFencing()), e.client(locker.WithFencing())
	p1 := ok(a.Acquire(ctx, key, 3))(t)
	p2 := ok(b.Acquire(ctx, key, 3))(t)
	if p1.Token() == 0 || p2.Token() <= p1.Token() {
		t.Fatalf("two permits' tokens %d then %d: want a new, larger token for each", p1.Token(), p2.Token())
	}
	inner := ok(a.Acquire(p1.Context(), key, 3))(t)
	if inner.Token() != p1.Token() {
		t.Fatalf("a re-entered permit's token %d, want its own %d (not the latest, %d)", inner.Token(), p1.Token(), p2.Token())
	}
	ok(0, inner.Unlock())(t)
	ok(0, p1.Unlock())(t)
	p3 := ok(a.Acquire(ctx, key, 3))(t)
	if p3.Token() <= p2.Token() {
		t.Fatalf("a later permit's token %d, want more than %d", p3.Token(), p2.Token())
	}
	ok(0, p2.Unlock())(t)
	ok(0, p3.Unlock())(t)
	lock := ok(a.Lock(ctx, key))(t) // the key's counter goes on for a lock
	defer lock.Unlock()
	if lock.Token() <= p3.Token() {
		t.Fatalf("a lock after the permits: token %d, want more than %d", lock.Token(), p3.Token())
	}
}

// A waiter whose fallback timers are far away gets the permit that an Unlock frees at once,
// while the other permits stay taken: only the release notice (or, on a Granter, the grant's)
// can have woken it. And a plain subscription is told of every release that ends a permit.
func permitNoticeWakesWaiter(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("permit-notice")
	skipWithoutNotices(e, key)
	permitNotices(e, e.key("permit-notices"))
	refusals := e.probe.faults.watchRefusals()
	long := locker.WithTTL(10 * e.ttl) // the holders' leases bound the waiter's timer
	stays := ok(e.client(long).Acquire(ctx, key, 2))(t)
	defer stays.Unlock()
	leaves := ok(e.client(long).Acquire(ctx, key, 2))(t)
	type outcome struct {
		at  time.Time
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		l, err := e.client(long).Acquire(ctx, key, 2, locker.WithRetry(locker.LinearBackoff(time.Hour)))
		at := time.Now()
		if err == nil {
			err = l.Unlock()
		}
		got <- outcome{at, err}
	}()
	waitForRefusal(e, refusals, key, 2) // before and after subscribing
	released := time.Now()
	ok(0, leaves.Unlock())(t)
	select {
	case o := <-got:
		if o.err != nil {
			t.Fatalf("waiter: %v", o.err)
		}
		if d := o.at.Sub(released); d > e.ttl/2 {
			t.Fatalf("the waiter took %v after a permit was freed, want well under a TTL", d)
		}
	case <-time.After(e.ttl):
		t.Fatal("the waiter was not woken within a TTL of a permit's release")
	}
}

// On a backend that is a locker.HandOffer, the Unlock of a permit while Acquire calls of the
// same Client wait in its line hands the permit to one of them: one HandOff and no Release, the
// permit held throughout; the taker's lease is renewed and given back as any other.
// A fenced call (it needs the backend's token) is never handed one: the giver releases.
func permitHandOff(e *env) {
	t := e.t
	if _, isHandOffer := e.backend().(locker.HandOffer); !isHandOffer {
		t.Skip("the backend is no locker.HandOffer")
	}
	c, key := e.client(), e.key("permit-hand-off")
	holder, waiting := inLine(e, c, key)
	before := e.probe.Calls()
	ok(0, holder.Unlock())(t)
	var taker *locker.Lease
	select {
	case r := <-waiting:
		taker = r.get(t, "an Acquire handed the permit")
	case <-time.After(2 * e.ttl):
		t.Fatal("no Acquire in line got the permit within 2 TTLs of the Unlock")
	}
	if calls := e.probe.Calls().Sub(before); calls.HandOff != 1 || calls.Release != 0 {
		// (The call left in line takes the token, and tries the backend: its Acquire calls.)
		t.Fatalf("an Unlock with Acquire calls in line made %+v calls, want one HandOff and no Release", calls)
	}
	if st := inspect(e, key); st.Limit != 1 || len(st.Holders) != 1 || st.Holders[0].Owner != taker.Owner() || st.Holders[0].Holds != 1 {
		t.Fatalf("after the hand-off: %+v, want the taker %s holding the one permit once", st, taker.Owner())
	}
	time.Sleep(2 * e.ttl) // renewed past two leases
	if err := context.Cause(taker.Context()); err != nil {
		t.Fatalf("the taker's lease ended (%v): a handed-off permit must be renewed", err)
	}
	ok(0, taker.Unlock())(t) // to the other call in line
	select {
	case r := <-waiting:
		ok(0, r.get(t, "the second Acquire in line").Unlock())(t)
	case <-time.After(2 * e.ttl):
		t.Fatal("the second Acquire in line did not get the permit within 2 TTLs")
	}
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after every Unlock: %+v, want free", st)
	}

	fenced := e.client(locker.WithFencing())
	key = e.key("permit-hand-off-fenced")
	holder, waiting = inLine(e, fenced, key)
	before = e.probe.Calls()
	ok(0, holder.Unlock())(t)
	for range 2 {
		select {
		case r := <-waiting:
			l := r.get(t, "a fenced Acquire in line")
			if l.Token() == 0 {
				t.Fatal("a fenced Acquire got no token")
			}
			ok(0, l.Unlock())(t)
		case <-time.After(2 * e.ttl):
			t.Fatal("a fenced Acquire in line did not get the permit within 2 TTLs")
		}
	}
	if calls := e.probe.Calls().Sub(before); calls.HandOff != 0 || calls.Release < 2 {
		t.Fatalf("Unlocks with fenced Acquire calls in line made %+v calls, want Releases and no HandOff", calls)
	}
}

// inLine makes two Acquire calls of c on key, a semaphore of 1, wait behind a holder of c: the
// first refused (it then tries the backend for the line, and has subscribed once refused twice),
// the second waiting in the line. It returns the holder's Lease and the channel on which the
// two calls' results come.
func inLine(e *env, c *locker.Client, key string) (*locker.Lease, <-chan leaseOrError) {
	t, ctx := e.t, background(e.t)
	refusals := e.probe.faults.watchRefusals()
	holder := ok(c.Acquire(ctx, key, 1))(t)
	waiting := make(chan leaseOrError, 2)
	acquire := func() {
		l, err := c.Acquire(ctx, key, 1)
		waiting <- leaseOrError{l, err}
	}
	go acquire()
	waitForRefusal(e, refusals, key, 2) // refused, it makes the line, subscribes, is refused again
	go acquire()
	e.settle()
	return holder, waiting
}

// permitGrants: on a locker.Granter, a release that ends a permit grants it to the first waiter
// of the queue that asked for a permit, with a token of its own and the grant's lease, while the
// other permits stay as they are, and its notice wakes that waiter only; the waiter takes the
// permit with its next Acquire (its lease reset to its TTL); a waiter that gives up (Dequeue)
// gives back a permit it did not take.
func permitGrants(e *env) {
	g, granter := e.probe.faults.Locker.(locker.Granter)
	if !granter {
		e.t.Skip("the backend is no locker.Granter")
	}
	t, ctx, key := e.t, background(e.t), e.key("permit-grants")
	grant := e.ttl / 2
	req := func(owner, id string) locker.AcquireRequest {
		return locker.AcquireRequest{Key: key, Owner: owner, TTL: e.ttl, ID: id, Fresh: true, Fence: true, Wait: e.ttl, Grant: grant, Limit: 2}
	}
	var tokens []uint64
	for _, holder := range []string{"holder-1", "holder-2"} {
		a := ok(g.Acquire(ctx, req(holder, holder)))(t)
		if !a.Acquired() {
			t.Fatalf("Acquire by %s of a free permit = %+v", holder, a)
		}
		tokens = append(tokens, a.Token)
	}
	for _, owner := range []string{"first", "second"} {
		if a := ok(g.Acquire(ctx, req(owner, owner+"1")))(t); a.Acquired() {
			t.Fatalf("Acquire by %s with every permit taken = %+v, want a refusal that queues", owner, a)
		}
	}
	first, stop1, err := g.SubscribeAs(ctx, key, "first")
	ok(0, err)(t)
	defer stop1()
	second, stop2, err := g.SubscribeAs(ctx, key, "second")
	ok(0, err)(t)
	defer stop2()

	ok(g.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "holder-1", Shared: true}))(t)
	expectGrant(e, first, "first", "first1")
	e.settle() // a backend may wake the subscriptions of one notice one after the other
	select {
	case <-second:
		t.Fatal("the grant of a permit to the first waiter woke the second's subscription")
	default:
	}
	st := ok(g.Inspect(ctx, key))(t)
	if st.Limit != 2 || len(st.Holders) != 2 || st.Holders[0].Owner != "first" || st.Holders[1].Owner != "holder-2" || st.Queued != 1 ||
		st.Holders[0].TTL > grant+time.Millisecond {
		t.Fatalf("after the release: %+v, want the first waiter holding a permit with the grant's lease (%v) beside holder-2, the second queued", st, grant)
	}
	took := ok(g.Acquire(ctx, req("first", "first2")))(t)
	if took.Holds != 1 || took.Token <= tokens[1] {
		t.Fatalf("the first waiter's Acquire after its grant = %+v, want Holds 1 and a token of its own, above %d", took, tokens[1])
	}
	if again := ok(g.Acquire(ctx, req("first", "first3")))(t); again.Token != took.Token {
		t.Fatalf("the granted permit's token: %d, then %d; want its own each time", took.Token, again.Token)
	}
	ok(g.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "holder-2", Shared: true}))(t)
	expectGrant(e, second, "second", "second1")
	ok(0, g.Dequeue(ctx, key, "second"))(t)
	if st := ok(g.Inspect(ctx, key))(t); len(st.Holders) != 1 || st.Holders[0].Owner != "first" || st.Queued != 0 {
		t.Fatalf("after the second waiter gave up its grant: %+v, want the first waiter's permit alone, nobody queued", st)
	}
	ok(g.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "first", Shared: true}))(t)
	if st := ok(g.Inspect(ctx, key))(t); !freeState(st) || st.Queued != 0 {
		t.Fatalf("after the last permit's release: %+v, want the key free", st)
	}
}

// permitNotices checks that a plain subscription of key is told of the release of a permit
// while another stays, and of the last one's.
func permitNotices(e *env, key string) {
	t, ctx, b := e.t, background(e.t), e.probe.faults
	ch, cancel, err := b.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	for _, owner := range []string{"a", "b"} {
		ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: owner, TTL: e.ttl, Limit: 2}))(t)
	}
	for _, owner := range []string{"a", "b"} {
		ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: owner, Shared: true}))(t)
		select {
		case <-ch:
		case <-time.After(e.ttl):
			t.Fatalf("no notice within a TTL of the release of %s's permit", owner)
		}
	}
}
