package conformance

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// kinds runs the properties of shared holds and wait queues: on a locker.KindLocker, the state
// machine and one subtest per Client property; on any other backend, Unsupported alone.
func (s *suite) kinds(t *testing.T) {
	kind := false
	s.inCase(t, func(e *env) { kind = e.kind() })
	if !kind {
		t.Run("Unsupported", func(t *testing.T) { s.inCase(t, unsupported) })
		t.Skip("the backend is no locker.KindLocker: no shared holds or wait queues to check")
	}
	t.Run("Model", s.kindsModel)
	s.properties(t, []property{
		{"Exclusion", kindsExclusion},
		{"ReaderSharing", readerSharing},
		{"ReaderLeases", readerLeases},
		{"FixedReaderLeases", fixedReaderLeases},
		{"NoUpgrade", noUpgrade},
		{"Downgrade", downgrade},
		{"DowngradeWakesReaders", downgradeWakesReaders},
		{"WriterPreference", writerPreference},
		{"ReaderTurn", readerTurn},
		{"ReaderWakesReaders", readerWakesReaders},
		{"ReleaseKeepsWaitingEntry", releaseKeepsWaitingEntry},
		{"DeadWriter", deadWriter},
		{"FairOrder", fairOrder},
		{"FairTryLock", fairTryLock},
		{"SharedFencing", sharedFencing},
		{"SharedRequestIDs", sharedRequestIDs},
		{"Grants", grants},
	})
}

// On a backend that is no KindLocker, RLock, TryRLock and a fair Lock return an error wrapping
// errors.ErrUnsupported without a call to the backend.
func unsupported(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("unsupported"), e.client()
	calls := map[string]func() error{
		"RLock":        func() error { _, err := c.RLock(ctx, key); return err },
		"TryRLock":     func() error { _, err := c.TryRLock(ctx, key); return err },
		"fair Lock":    func() error { _, err := c.Lock(ctx, key, locker.WithFair()); return err },
		"fair TryLock": func() error { _, err := c.TryLock(ctx, key, locker.WithFair()); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s on a backend that is no KindLocker = %v, want an error wrapping errors.ErrUnsupported", name, err)
		}
	}
	if n := e.probe.total(""); n != 0 {
		t.Fatalf("the unsupported calls made %d backend calls, want none", n)
	}
}

// expectRefused fails the test unless err is a refusal (ErrNotObtained).
func expectRefused(t *testing.T, what string, l *locker.Lease, err error) {
	t.Helper()
	if !errors.Is(err, locker.ErrNotObtained) {
		if err == nil {
			_ = l.Unlock()
		}
		t.Fatalf("%s = %v, want ErrNotObtained", what, err)
	}
}

// kindsExclusion: writers (Lock) and readers (RLock) on one key, from several Clients, some of
// them fair. A writer is never inside with anyone else, readers are inside together, and the
// writers' counter, which only the lock protects, loses no update.
func kindsExclusion(e *env) {
	const writers, readers, rounds = 3, 5, 12
	t, ctx, key := e.t, background(e.t), e.key("rw-exclusion")
	var (
		inW, inR, most atomic.Int32
		counter        int // written under the exclusive hold only
		seen           atomic.Int64
		wg             sync.WaitGroup
		fail           = make(chan error, writers+readers)
	)
	retry := locker.WithRetry(locker.LinearBackoff(e.ttl / 50))
	for i := range writers + readers {
		opts := []locker.Option{retry}
		if i%2 == 1 {
			opts = append(opts, locker.WithFair())
		}
		c := e.client()
		reader := i >= writers
		wg.Go(func() {
			for range rounds {
				lock := c.Lock
				if reader {
					lock = c.RLock
				}
				l, err := lock(ctx, key, opts...)
				if err != nil {
					fail <- err
					return
				}
				if reader {
					n := inR.Add(1)
					raise(&most, n)
					if w := inW.Load(); w != 0 {
						t.Errorf("a reader inside with %d writers", w)
					}
					seen.Add(int64(counter))
					runtime.Gosched()
					inR.Add(-1)
				} else {
					if w, r := inW.Add(1), inR.Load(); w != 1 || r != 0 {
						t.Errorf("a writer inside with %d writers and %d readers", w, r)
					}
					v := counter
					runtime.Gosched() // widen the window a second holder would need
					counter = v + 1
					inW.Add(-1)
				}
				if err := l.Unlock(); err != nil {
					fail <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if counter != writers*rounds {
		t.Fatalf("counter = %d after %d locked increments: updates were lost", counter, writers*rounds)
	}
	t.Logf("at most %d readers inside at once", most.Load())
}

// Readers share a key: readers of separate Clients (and two of one Client) hold it together,
// Inspect says so, a writer is refused meanwhile, and gets it once they all unlocked. A forced
// release ends every reader's lease.
func readerSharing(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("sharing")
	one := e.client()
	clients := []*locker.Client{one, one, e.client(), e.client()}
	var leases []*locker.Lease
	for i, c := range clients {
		l := ok(c.TryRLock(ctx, key))(t)
		if !l.Shared() || l.Holds() != 1 {
			t.Fatalf("reader %d: Shared %v, holds %d; want a shared lease with one hold", i, l.Shared(), l.Holds())
		}
		leases = append(leases, l)
	}
	st := inspect(e, key)
	if !st.Locked || !st.Shared || st.Readers != len(clients) || st.Holds != len(clients) || st.TTL <= 0 {
		t.Fatalf("Locker.Inspect with %d readers: %+v", len(clients), st)
	}
	if cst := ok(one.Inspect(ctx, key))(t); !cst.Shared || cst.Readers != len(clients) {
		t.Fatalf("Client.Inspect with %d readers: %+v", len(clients), cst)
	}
	l, err := e.client().TryLock(ctx, key)
	expectRefused(t, "TryLock while readers hold the key", l, err)
	for _, l := range leases[1:] {
		ok(0, l.Unlock())(t)
	}
	if st := inspect(e, key); !st.Shared || st.Readers != 1 || st.Owner != leases[0].Owner() {
		t.Fatalf("one reader left: %+v, want it shared by %s alone", st, leases[0].Owner())
	}
	ok(0, leases[0].Unlock())(t)
	if st := inspect(e, key); !freeState(st) || st.Queued != 0 {
		t.Fatalf("after every reader unlocked: %+v, want the zero State", st)
	}
	w := ok(e.client().TryLock(ctx, key))(t)
	ok(0, w.Unlock())(t)

	a, b := ok(one.RLock(ctx, key))(t), ok(e.client().RLock(ctx, key))(t)
	if !ok(one.ForceUnlock(ctx, key))(t) {
		t.Fatal("ForceUnlock of a shared key reported no lock")
	}
	deadline := time.Now().Add(e.ttl)
	endsLost(e, a, deadline, "a reader's lease context did not end within a TTL of a forced release")
	endsLost(e, b, deadline, "a reader's lease context did not end within a TTL of a forced release")
}

// A reader asking for the exclusive lock through its lease's context fails at once with
// ErrUpgrade, whatever the retry strategy, and changes nothing.
func noUpgrade(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("upgrade"), e.client()
	r := ok(c.RLock(ctx, key))(t)
	other := ok(e.client().RLock(ctx, key))(t)
	before := inspect(e, key)
	acquires := e.probe.total("Acquire")
	within, cancel := context.WithTimeout(r.Context(), e.ttl) // fails at once, or at the timeout
	defer cancel()
	for name, lock := range map[string]func(context.Context, string, ...locker.Option) (*locker.Lease, error){
		"Lock": c.Lock, "TryLock": c.TryLock,
	} {
		l, err := lock(within, key, locker.WithRetry(locker.LinearBackoff(e.ttl/20)))
		if !errors.Is(err, locker.ErrUpgrade) {
			if err == nil {
				_ = l.Unlock()
			}
			t.Fatalf("%s through a shared lease's context = %v, want ErrUpgrade", name, err)
		}
	}
	if n := e.probe.total("Acquire") - acquires; n > 2 {
		t.Fatalf("the upgrades made %d Acquire calls, want one each: no retry", n)
	}
	if after := inspect(e, key); after.Shared != before.Shared || after.Readers != 2 || after.Holds != 2 || after.Queued != 0 {
		t.Fatalf("after the refused upgrades: %+v, want %+v (nothing changed, nothing queued)", after, before)
	}
	if r.Context().Err() != nil {
		t.Fatal("a refused upgrade ended the reader's lease")
	}
	ok(0, other.Unlock())(t)
	ok(0, r.Unlock())(t)
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after both readers unlocked: %+v, want free", st)
	}
}

// A writer takes shared holds through its lease's context (a downgrade): the key stays
// exclusive, and after the writer's Unlock the owner still reads and other readers may join.
func downgrade(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("downgrade"), e.client()
	w := ok(c.Lock(ctx, key))(t)
	r := ok(c.RLock(w.Context(), key))(t)
	if !r.Shared() || r.Holds() != 2 || r.Owner() != w.Owner() {
		t.Fatalf("RLock through a Lock lease's context: shared %v, holds %d, owner %s; want a shared hold of the writer, 2 holds",
			r.Shared(), r.Holds(), r.Owner())
	}
	if st := inspect(e, key); !st.Locked || st.Shared || st.Owner != w.Owner() || st.Holds != 2 {
		t.Fatalf("after the downgrade's RLock: %+v, want the writer holding it exclusively, 2 holds", st)
	}
	l, err := e.client().TryRLock(ctx, key)
	expectRefused(t, "another reader while the writer holds the key", l, err)
	ok(0, w.Unlock())(t)
	if st := inspect(e, key); !st.Shared || st.Readers != 1 || st.Owner != w.Owner() || st.Holds != 1 {
		t.Fatalf("after the writer's Unlock: %+v, want it shared by the former writer alone", st)
	}
	if r.Context().Err() != nil {
		t.Fatal("the writer's Unlock ended its shared lease")
	}
	joined := ok(e.client().TryRLock(ctx, key))(t)
	if st := inspect(e, key); st.Readers != 2 {
		t.Fatalf("after another reader joined: %+v, want 2 readers", st)
	}
	ok(0, r.Unlock())(t)
	ok(0, joined.Unlock())(t)
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after every Unlock: %+v, want free", st)
	}
}

// waitQueued waits until the probe has seen a refused Acquire with a Wait from an owner not in
// seen (a waiter that has joined the queue), and returns that owner.
func waitQueued(e *env, queued <-chan string, seen map[string]bool) string {
	e.t.Helper()
	timeout := time.After(10 * e.ttl)
	for {
		select {
		case o := <-queued:
			if !seen[o] {
				seen[o] = true
				return o
			}
		case <-timeout:
			e.t.Fatal("the waiter did not join the queue")
		}
	}
}

// A writer that waits blocks new readers (writers are not starved), and Inspect counts it; once
// it gives up (its ctx ends), it stops blocking them at once: the Client takes it out of the
// queue.
func writerPreference(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("writer-preference")
	queued, dequeued := e.probe.faults.watchQueued(), e.probe.faults.watchDequeued()
	r := ok(e.client().RLock(ctx, key))(t)
	defer r.Unlock()
	wctx, give := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		l, err := e.client().Lock(wctx, key)
		if err == nil {
			_ = l.Unlock()
		}
		done <- err
	}()
	writer := waitQueued(e, queued, map[string]bool{})
	if st := inspect(e, key); !st.Shared || st.Readers != 1 || st.Queued != 1 {
		t.Fatalf("a reader holds, a writer waits: %+v, want 1 reader and Queued 1", st)
	}
	for name, c := range map[string]*locker.Client{"another Client": e.client(), "a fair Client": e.client(locker.WithFair())} {
		l, err := c.TryRLock(ctx, key)
		expectRefused(t, "TryRLock of "+name+" while a writer waits", l, err)
	}
	give()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the writer's Lock whose ctx ended = %v, want context.Canceled", err)
	}
	select {
	case o := <-dequeued:
		if o != writer {
			t.Fatalf("Dequeue of %s, want the writer %s", o, writer)
		}
	case <-time.After(e.ttl):
		t.Fatal("the writer that gave up was not taken out of the queue within a TTL")
	}
	l := ok(e.client().TryRLock(ctx, key))(t) // at once: the writer no longer waits
	ok(0, l.Unlock())(t)
	if st := inspect(e, key); st.Queued != 0 {
		t.Fatalf("after the writer gave up: %+v, want nobody queued", st)
	}
}

// A release that frees the key ends its owner's grant record, if any, and nothing else of the
// owner's in the queue: a reader's waiting entry, left from before the owner took the key with
// a plain exclusive request, stays until its deadline or a Dequeue. (The plain request itself
// may pass the queue without reading it, keeping the entry, or take the entry out, as the
// model allows: the release must leave the queue as that request left it.)
func releaseKeepsWaitingEntry(e *env) {
	t, ctx, key, b := e.t, background(e.t), e.key("release-keeps-entry"), e.kindProbe()
	if a := ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "holder", TTL: e.ttl}))(t); !a.Acquired() {
		t.Fatalf("Acquire of a free key = %+v", a)
	}
	reader := locker.AcquireRequest{Key: key, Owner: "owner", TTL: e.ttl, Shared: true, Wait: 10 * e.ttl}
	if a := ok(b.Acquire(ctx, reader))(t); a.Acquired() {
		t.Fatal("a reader was granted a key that a writer holds")
	}
	defer func() { _ = b.Dequeue(context.Background(), key, reader.Owner) }()
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "holder"}))(t)
	if a := ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "owner", TTL: e.ttl}))(t); !a.Acquired() {
		t.Fatalf("a plain exclusive Acquire of a free key = %+v, want it granted (it passes the queue)", a)
	}
	queued := inspect(e, key).Queued // 1: the owner's entry, kept; or 0
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "owner"}))(t)
	if st := inspect(e, key); st.Locked || st.Queued != queued {
		t.Fatalf("after the owner's release: %+v, want the key free and Queued %d, as before the release (the owner's reader entry)", st, queued)
	}
}

// Readers that wait are not starved either: a writer that comes after them (one that unlocked
// and locks again at once, say) waits behind them. The first reader is a slow process (an
// entry made at the Locker level); a Client's RLock queues behind it and, a reader too, is not
// blocked by it; the writer that came later is refused until both readers had their turn.
func readerTurn(e *env) {
	t, ctx, key, b := e.t, background(e.t), e.key("reader-turn"), e.kindProbe()
	holder := ok(e.client().Lock(ctx, key))(t)
	slow := locker.AcquireRequest{Key: key, Owner: "slow-reader", TTL: e.ttl, Shared: true, Wait: 10 * e.ttl}
	if a := ok(b.Acquire(ctx, slow))(t); a.Acquired() {
		t.Fatal("a reader was granted a key that a writer holds")
	}
	defer func() { _ = b.Dequeue(context.Background(), key, slow.Owner) }()
	queued := e.probe.faults.watchQueued()
	done := make(chan error, 1)
	go func() {
		l, err := e.client().RLock(ctx, key)
		if err == nil {
			err = l.Unlock()
		}
		done <- err
	}()
	waitQueued(e, queued, map[string]bool{}) // the Client's reader waits in the queue
	if st := inspect(e, key); st.Queued != 2 {
		t.Fatalf("a writer holds, two readers wait: %+v, want Queued 2", st)
	}
	ok(0, holder.Unlock())(t)
	later := locker.AcquireRequest{Key: key, Owner: "later-writer", TTL: e.ttl, Wait: 10 * e.ttl}
	defer func() { _ = b.Dequeue(context.Background(), key, later.Owner) }()
	if a := ok(b.Acquire(ctx, later))(t); a.Acquired() {
		t.Fatal("a writer that came after waiting readers was granted the key before them")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the Client's reader, queued behind another reader: %v", err)
		}
	case <-time.After(10 * e.ttl):
		t.Fatal("the Client's reader did not obtain the key once the writer left")
	}
	if a := ok(b.Acquire(ctx, later))(t); a.Acquired() {
		t.Fatal("a writer that came after a waiting reader was granted the key before it")
	}
	if a := ok(b.Acquire(ctx, slow))(t); !a.Acquired() {
		t.Fatalf("the first reader in the queue was refused (%+v)", a)
	}
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: slow.Owner, Shared: true}))(t)
	if a := ok(b.Acquire(ctx, later))(t); !a.Acquired() {
		t.Fatalf("the writer, first in the queue of a free key, was refused (%+v)", a)
	}
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: later.Owner}))(t)
}

// A waiting writer whose process died (a queue entry never refreshed) blocks new readers for at
// most its Wait.
func deadWriter(e *env) {
	t, ctx, key, b := e.t, background(e.t), e.key("dead-writer"), e.probe.faults
	r := ok(e.client().RLock(ctx, key))(t)
	defer r.Unlock()
	wait := e.ttl / 4
	queuedAt := time.Now()
	if a := ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "dead-writer", TTL: e.ttl, Wait: wait}))(t); a.Acquired() {
		t.Fatal("a writer was granted a key that a reader holds")
	}
	l, err := e.client().TryRLock(ctx, key)
	if time.Since(queuedAt) < wait-e.ttl/20 { // a reply after the entry's end proves nothing
		expectRefused(t, "TryRLock while a writer waits", l, err)
	} else if err == nil {
		ok(0, l.Unlock())(t)
	}
	within, cancel := context.WithDeadline(ctx, queuedAt.Add(wait+e.ttl/4))
	defer cancel()
	l, err = e.client().RLock(within, key, locker.WithRetry(locker.LinearBackoff(e.ttl/50)))
	if err != nil {
		t.Fatalf("RLock after the dead writer's Wait (%v): %v, want it granted", wait, err)
	}
	ok(0, l.Unlock())(t)
}

// Fair Lock calls of separate Clients obtain the key in the order in which they first asked; a
// waiter that gives up leaves the queue and the others keep their order. The first waiter is a
// slow process (an entry made at the Locker level, sent again only when the test says): while
// it is first, the key stays free, whatever the Clients' waiters try when the holder unlocks.
func fairOrder(e *env) {
	const waiters = 3
	t, ctx, key, b := e.t, background(e.t), e.key("fair-order"), e.kindProbe()
	queued, refusals := e.probe.faults.watchQueued(), e.probe.faults.watchRefusals()
	holder := ok(e.client(locker.WithFair()).Lock(ctx, key))(t)
	first := locker.AcquireRequest{Key: key, Owner: "slow-first", TTL: e.ttl, Fair: true, Wait: 10 * e.ttl}
	seen := map[string]bool{}
	ok(b.Acquire(ctx, first))(t)
	waitQueued(e, queued, seen)
	order := make(chan int, waiters)
	errs := make(chan error, waiters)
	cancels := make([]context.CancelFunc, waiters)
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	for i := range waiters {
		c := e.client(locker.WithFair())
		wctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		go func() {
			l, err := c.Lock(wctx, key)
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- l.Unlock()
		}()
		waitQueued(e, queued, seen) // joined the queue before the next one asks
	}
	if st := inspect(e, key); st.Queued != waiters+1 {
		t.Fatalf("%d fair waiters: %+v, want Queued %d", waiters+1, st, waiters+1)
	}
	cancels[1]() // the third in the queue gives up
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter that gave up: %v, want context.Canceled", err)
	}
	for len(refusals) > 0 {
		<-refusals
	}
	ok(0, holder.Unlock())(t) // the key is free; the slow first waiter has not come back yet
	waitForRefusal(e, refusals, key, 2)
	select {
	case i := <-order:
		t.Fatalf("fair waiter %d obtained the lock while the first in the queue was still waiting", i)
	default:
	}
	if a := ok(b.Acquire(ctx, first))(t); !a.Acquired() {
		t.Fatalf("the first in the queue was refused (%+v) on a free key", a)
	}
	ok(b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: first.Owner}))(t)
	for _, w := range []int{0, 2} {
		select {
		case got := <-order:
			if got != w {
				t.Fatalf("fair waiter %d obtained the lock, want %d (the order they asked in)", got, w)
			}
		case <-time.After(10 * e.ttl):
			t.Fatalf("fair waiter %d did not obtain the lock", w)
		}
		if err := <-errs; err != nil {
			t.Fatalf("fair waiter %d: %v", w, err)
		}
	}
}

// A fair TryLock or TryRLock never jumps the queue: on a free key with a waiter queued, it is
// refused, and granted once the waiter left.
func fairTryLock(e *env) {
	t, ctx, key, b := e.t, background(e.t), e.key("fair-try"), e.kindProbe()
	holder := ok(e.client().Lock(ctx, key))(t)
	ok(b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "waiter", TTL: e.ttl, Fair: true, Wait: 10 * e.ttl}))(t)
	ok(0, holder.Unlock())(t)
	c := e.client(locker.WithFair())
	l, err := c.TryLock(ctx, key)
	expectRefused(t, "a fair TryLock of a free key with a writer queued", l, err)
	l, err = c.TryRLock(ctx, key)
	expectRefused(t, "a fair TryRLock of a free key with a writer queued", l, err)
	if st := inspect(e, key); st.Locked || st.Queued != 1 {
		t.Fatalf("after the refused fair calls: %+v, want free with the one waiter queued", st)
	}
	ok(0, b.Dequeue(ctx, key, "waiter"))(t)
	l = ok(c.TryLock(ctx, key))(t)
	ok(0, l.Unlock())(t)
}

// probe is the probed backend as a KindLocker (only called on one).
func (e *env) kindProbe() kindProbe { return kindProbe{e.probe} }

// Fencing tokens advance only with writers: readers report the latest writer's token, a
// downgrade its writer's, the next writer a larger one.
func sharedFencing(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("shared-fencing")
	a, b := e.client(locker.WithFencing()), e.client(locker.WithFencing())
	w := ok(a.Lock(ctx, key))(t)
	down := ok(a.RLock(w.Context(), key))(t)
	if down.Token() != w.Token() {
		t.Fatalf("a downgrade's token %d, want its writer's %d", down.Token(), w.Token())
	}
	ok(0, w.Unlock())(t)
	r := ok(b.RLock(ctx, key))(t)
	if r.Token() != w.Token() {
		t.Fatalf("a reader's token %d, want the latest writer's %d", r.Token(), w.Token())
	}
	ok(0, down.Unlock())(t)
	ok(0, r.Unlock())(t)
	r = ok(a.RLock(ctx, key))(t)
	if r.Token() != w.Token() {
		t.Fatalf("a later reader's token %d, want still the latest writer's %d: readers do not advance it", r.Token(), w.Token())
	}
	ok(0, r.Unlock())(t)
	next := ok(b.Lock(ctx, key))(t)
	defer next.Unlock()
	if next.Token() <= w.Token() {
		t.Fatalf("the next writer's token %d, want more than %d", next.Token(), w.Token())
	}
}

// A shared acquire or release whose reply is lost is sent again with the same request ID: it
// takes effect once.
func sharedRequestIDs(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("shared-ids"), e.client()
	e.probe.faults.loseReplies("Acquire", 1, errLostReply)
	outer := ok(c.RLock(ctx, key))(t)
	if st := inspect(e, key); outer.Holds() != 1 || st.Holds != 1 || st.Readers != 1 {
		t.Fatalf("RLock after a lost reply: %d holds (backend: %+v), want 1", outer.Holds(), st)
	}
	e.probe.faults.loseReplies("Acquire", 1, errLostReply)
	inner := ok(c.RLock(outer.Context(), key))(t)
	if st := inspect(e, key); inner.Holds() != 2 || st.Holds != 2 || st.Readers != 1 {
		t.Fatalf("shared re-entry after a lost reply: %d holds (backend: %+v), want 2", inner.Holds(), st)
	}
	e.probe.faults.loseReplies("Release", 1, errLostReply)
	ok(0, inner.Unlock())(t)
	if st := inspect(e, key); st.Holds != 1 {
		t.Fatalf("after the inner Unlock with a lost reply: %+v, want 1 hold left", st)
	}
	ok(0, outer.Unlock())(t)
	if st := inspect(e, key); st.Locked {
		t.Fatalf("after both Unlocks: %+v, want free", st)
	}
}
