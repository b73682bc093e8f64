package conformance

import (
	"time"

	"github.com/hashlock/locker"
)

// grants: on a locker.Granter, a release that frees the key grants it to the first waiter of
// the queue that asked for a grant, with a new fencing token and the grant's lease, and its
// notice wakes that waiter only, with the ID of the request that queued it (a subscription for
// another owner stays quiet; a plain one wakes). The waiter takes the key with its next Acquire (the lease reset to its TTL); a waiter
// that gives up (Dequeue) hands a grant it did not take on, here to nobody: the key is free.
func grants(e *env) {
	g, granter := e.probe.faults.Locker.(locker.Granter)
	if !granter {
		e.t.Skip("the backend is no locker.Granter")
	}
	t, ctx, key := e.t, background(e.t), e.key("grants")
	grant := e.ttl / 2
	req := func(owner, id string) locker.AcquireRequest {
		return locker.AcquireRequest{Key: key, Owner: owner, TTL: e.ttl, ID: id, Fresh: true, Fence: true, Wait: e.ttl, Grant: grant}
	}
	held := ok(g.Acquire(ctx, req("holder", "h1")))(t)
	if !held.Acquired() {
		t.Fatalf("Acquire of a free key = %+v", held)
	}
	for _, owner := range []string{"first", "second"} {
		ok(g.Acquire(ctx, req(owner, owner+"-old")))(t) // its entry, refreshed below
		if a := ok(g.Acquire(ctx, req(owner, owner+"1")))(t); a.Acquired() {
			t.Fatalf("Acquire by %s of a held key = %+v, want a refusal that queues", owner, a)
		}
	}
	first, stop1, err := g.SubscribeAs(ctx, key, "first")
	ok(0, err)(t)
	defer stop1()
	second, stop2, err := g.SubscribeAs(ctx, key, "second")
	ok(0, err)(t)
	defer stop2()
	plain, stop3, err := g.Subscribe(ctx, key)
	ok(0, err)(t)
	defer stop3()

	released := time.Now()
	ok(g.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "holder"}))(t)
	expectGrant(e, first, "first", "first1")
	select {
	case <-plain:
	case <-time.After(10 * e.ttl):
		t.Fatal("a plain subscription missed the notice of a release")
	}
	e.settle() // a backend may wake the subscriptions of one notice one after the other
	select {
	case <-second:
		t.Fatal("the grant to the first waiter woke the second's subscription")
	default:
	}
	st := ok(g.Inspect(ctx, key))(t)
	if !st.Locked || st.Owner != "first" || st.Holds != 1 || st.Queued != 1 || st.TTL > grant+time.Millisecond {
		t.Fatalf("after the release: %+v, want the first waiter holding it once with the grant's lease (%v), the second queued", st, grant)
	}
	took := ok(g.Acquire(ctx, req("first", "first2")))(t)
	if took.Holds != 1 || took.Token <= held.Token {
		t.Fatalf("the first waiter's Acquire after its grant = %+v, want Holds 1 and a token above the holder's %d", took, held.Token)
	}
	if st := ok(g.Inspect(ctx, key))(t); st.TTL <= grant && time.Since(released) < e.ttl-grant {
		t.Fatalf("after the grant was taken: %+v, want the lease reset to %v", st, e.ttl)
	}

	ok(g.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "first"}))(t)
	expectGrant(e, second, "second", "second1")
	ok(0, g.Dequeue(ctx, key, "second"))(t)
	if st := ok(g.Inspect(ctx, key))(t); st.Locked || st.Queued != 0 {
		t.Fatalf("after the second waiter gave up its grant: %+v, want the key free and nobody queued", st)
	}
	next := ok(g.Acquire(ctx, req("third", "third1")))(t)
	if next.Holds != 1 || next.Token <= took.Token+1 {
		t.Fatalf("Acquire after two grants = %+v, want Holds 1 and a token above %d (each grant draws one)", next, took.Token+1)
	}
}

// expectGrant waits (up to 10 TTLs) for the notice of a grant to the waiter who on its
// subscription notices, and fails the test unless it carries id, the ID of its latest request.
func expectGrant(e *env, notices <-chan string, who, id string) {
	e.t.Helper()
	select {
	case got := <-notices:
		if got != id {
			e.t.Fatalf("the %s waiter was told of a grant with request ID %q, want %q (its latest request)", who, got, id)
		}
	case <-time.After(10 * e.ttl):
		e.t.Fatalf("the %s waiter was not told of the grant of the key to it", who)
	}
}
