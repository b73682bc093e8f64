package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/hashlock/locker"
)

// The steps of the state machine: each draws a call, sends it to the backend and checks the
// answer against the model (transitions.go), which follows it.

// acquireStep draws an Acquire: any (how ""); on a KindLocker, of either kind, fair or not,
// waiting or not, or one that queues when refused ("queued"), or a plain reader's ("reader"); on
// a Semaphorer, a permit request ("permit"; "permit queued" queues when refused) of the key's
// limit, or now and then of another.
func (x *machine) acquireStep(how string) func(t *rapid.T) {
	return func(t *rapid.T) {
		key, owner := x.drawKey(t), x.drawOwner(t)
		reentry := (how == "" || how == "permit") && rapid.IntRange(0, x.cfg.reentry-1).Draw(t, "reentry") == 0
		req := locker.AcquireRequest{Key: key, Owner: owner, TTL: x.drawLease(t, owner), ID: x.newID(t),
			Fence: rapid.Bool().Draw(t, "fence"), Reentry: reentry}
		if x.kl != nil {
			x.drawKind(t, &req, strings.TrimPrefix(how, "permit "))
		}
		if strings.HasPrefix(how, "permit") {
			req.Limit = x.drawLimit(t, key)
		}
		if how == "permit granted" && !reentry && !x.everHeld[[2]string{key, owner}] {
			// A fresh waiter that asks for a grant: a release of a permit may give it one.
			req.Fresh, req.Wait, req.Grant = true, x.unit*time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units")), x.unit*time.Duration(rapid.IntRange(1, 5).Draw(t, "grant units"))
		}
		req.Fresh = req.Fresh || (!reentry && x.drawFresh(t, key, owner))
		if a := x.acquire(t, req, "Acquire"); req.ID != "" && a.Acquired() {
			x.acquired = append(x.acquired, &modelRequest{acquire: req, holds: a.Holds})
		}
	}
}

// drawKind draws the kind of a KindLocker's request (see acquireStep): shared or not, fair or
// not, its Wait, and on a Granter a Grant.
func (x *machine) drawKind(t *rapid.T, req *locker.AcquireRequest, how string) {
	req.Shared = how == "reader" || rapid.Bool().Draw(t, "shared")
	req.Fair = how != "reader" && rapid.Bool().Draw(t, "fair")
	if how == "queued" {
		req.Wait = x.unit * time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units"))
	} else {
		req.Wait = x.drawWait(t)
	}
	if _, grants := x.b.(locker.Granter); grants && rapid.Bool().Draw(t, "grant") {
		req.Grant = x.unit * time.Duration(rapid.IntRange(1, 5).Draw(t, "grant units"))
	}
}

// acquire sends req and checks the answer against the model, which follows it. A re-entry
// only (Reentry) adds a hold to the owner's, or fails with ErrNotHeld and changes nothing: it
// never takes a new lock.
func (x *machine) acquire(t *rapid.T, req locker.AcquireRequest, how string) locker.Acquisition {
	c := call{t0: time.Now()}
	a, err := x.b.Acquire(x.ctx, req)
	c.t1 = time.Now()
	what := fmt.Sprintf("%s(%+v) = %+v, %v", how, req, a, err)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) && !errors.Is(err, locker.ErrUpgrade) && !errors.Is(err, locker.ErrLimitMismatch) {
		t.Fatalf("%s: want nil, ErrNotHeld (a re-entry), ErrUpgrade or ErrLimitMismatch", what)
	}
	x.m.step(t, req.Key, c, what, x.m.acquired(req, a, err, c))
	if a.Acquired() {
		x.everHeld[[2]string{req.Key, req.Owner}] = true
	}
	if a.Acquired() && !normalized(req).Shared && a.Holds == 1 { // a new exclusive lock, or a fresh owner's
		if req.Fresh {
			x.freshLock[req.Key] = req.Owner
		} else {
			delete(x.freshLock, req.Key)
		}
	}
	return a
}

// acquireAgain sends a granted (or taken back) Acquire again. Taken back: refused. A fresh
// owner's plain request (exclusive, not waiting): recognised by its hold, else an acquire like
// any other (the machine sends no other fresh request again). Another owner's: remembered, it
// changes nothing and reports the first outcome while the owner holds the key, a refusal
// otherwise (with TTL 0 on one node; a quorum may report a holder's lease seen on a node that
// the first call never reached).
func (x *machine) acquireAgain(t *rapid.T) {
	again := slices.DeleteFunc(slices.Clone(x.acquired), func(r *modelRequest) bool {
		return r.acquire.Fresh && !r.undone && !plainRequest(r.acquire)
	})
	if len(again) == 0 {
		t.Skip("no Acquire with an ID yet")
	}
	r := rapid.SampledFrom(again).Draw(t, "request")
	if r.acquire.Fresh && !r.undone {
		x.acquire(t, r.acquire, "Acquire again")
		return
	}
	c := call{t0: time.Now()}
	a, err := x.b.Acquire(x.ctx, r.acquire)
	c.t1 = time.Now()
	what := fmt.Sprintf("Acquire again(%+v) = %+v, %v; first %d holds, undone %v", r.acquire, a, err, r.holds, r.undone)
	if err != nil && !errors.Is(err, locker.ErrLimitMismatch) {
		t.Fatalf("%s: want no error (or ErrLimitMismatch)", what)
	}
	x.m.step(t, r.acquire.Key, c, what, sentAgain(r, a, err))
}

// undo takes back a granted Acquire, or one that never came (a fresh ID): one hold of its kind
// (a fresh owner's: every hold, which can only come from that request). On a KindLocker, where
// the steps of the queue need them more, it takes back a known Acquire when there is one (the
// machine of plain holds, which runs on every backend, takes back those that never came).
func (x *machine) undo(t *rapid.T) {
	var r *modelRequest
	if len(x.acquired) > 0 && (x.kl != nil || rapid.Bool().Draw(t, "known")) {
		r = rapid.SampledFrom(x.acquired).Draw(t, "request")
	} else {
		x.nextID++
		key, owner := x.drawKey(t), x.drawOwner(t)
		r = &modelRequest{acquire: locker.AcquireRequest{
			Key: key, Owner: owner, TTL: x.drawLease(t, owner), ID: fmt.Sprintf("req-%d", x.nextID), Fresh: x.drawFresh(t, key, owner),
		}}
		x.acquired = append(x.acquired, r)
	}
	a := normalized(r.acquire)
	x.release(t, locker.ReleaseRequest{Key: a.Key, Owner: a.Owner, ID: a.ID, Undo: true, Fresh: a.Fresh, Shared: a.Shared}, r)
	r.undone = true
}

// release sends req (for a take-back, of r) and checks the answer against the model, which
// follows it.
func (x *machine) release(t *rapid.T, req locker.ReleaseRequest, r *modelRequest) {
	c := call{t0: time.Now()}
	n, err := x.b.Release(x.ctx, req)
	c.t1 = time.Now()
	what := fmt.Sprintf("Release(%+v) = %d, %v", req, n, err)
	if r != nil {
		what += fmt.Sprintf("; first %d holds, undone %v", r.holds, r.undone)
	}
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
	}
	x.m.step(t, req.Key, c, what, x.m.released(req, r, n, err, c))
	if err == nil && req.ID != "" && !req.Undo {
		x.released = append(x.released, &modelRequest{release: req, holds: n, sent: c.t0})
	}
}

// releaseRequest draws a Release of owner's hold of the kind named on key: with an ID or not,
// and by the owner whose fresh Acquire made the key's latest exclusive lock, sometimes Fresh,
// with a ReplyWindow of none, one that may end during the run, or one that outlives it.
func (x *machine) releaseRequest(t *rapid.T, key, owner string, shared bool) locker.ReleaseRequest {
	req := locker.ReleaseRequest{Key: key, Owner: owner, ID: x.newID(t), Shared: shared}
	req.Fresh = !shared && x.freshLock[key] == owner && rapid.Bool().Draw(t, "fresh")
	if req.Fresh {
		switch rapid.IntRange(0, 2).Draw(t, "reply window") {
		case 1:
			req.ReplyWindow = x.drawTTL(t)
		case 2:
			req.ReplyWindow = time.Hour
		}
	}
	return req
}

// releaseAny releases any owner's hold on any key (of either kind on a KindLocker).
func (x *machine) releaseAny(t *rapid.T) {
	key, owner := x.drawKey(t), x.drawOwner(t)
	shared := x.kl != nil && rapid.Bool().Draw(t, "shared")
	x.release(t, x.releaseRequest(t, key, owner, shared), nil)
}

// releaseHeld releases a hold that the model knows of.
func (x *machine) releaseHeld(t *rapid.T) {
	type hold struct {
		owner  string
		shared bool
	}
	key := x.drawKey(t)
	var holds []hold
	s := x.m.candidates(key)[0]
	for _, o := range s.owners() {
		if s.holds[o].w > 0 {
			holds = append(holds, hold{o, false})
		}
		if s.holds[o].r > 0 {
			holds = append(holds, hold{o, true})
		}
	}
	if len(holds) == 0 {
		t.Skip("no hold on the key")
	}
	h := rapid.SampledFrom(holds).Draw(t, "hold")
	x.release(t, x.releaseRequest(t, key, h.owner, h.shared), nil)
}

// releaseAgain sends a Release again: it reports the first outcome and changes nothing. A
// fresh owner's release of its last hold need be remembered only for its ReplyWindow (see
// freshReleaseAgain).
func (x *machine) releaseAgain(t *rapid.T) {
	if len(x.released) == 0 {
		t.Skip("no Release with an ID yet")
	}
	r := rapid.SampledFrom(x.released).Draw(t, "request")
	if r.release.Fresh && r.holds == 0 {
		x.freshReleaseAgain(t, r)
		return
	}
	n, err := x.b.Release(x.ctx, r.release)
	if err != nil || n != r.holds {
		t.Fatalf("Release again(%+v) = %d, %v; want the first outcome, %d, and no change", r.release, n, err, r.holds)
	}
}

// freshReleaseAgain sends again r, a fresh owner's release of its last hold: within its
// ReplyWindow it reports the first outcome, 0; later it may find the owner holding nothing and
// report ErrNotHeld. It changes nothing. (A fresh owner never holds the key again; only a fresh
// Acquire sent again after its release, which the Client never sends, gives it a new lock:
// such a run is skipped.)
func (x *machine) freshReleaseAgain(t *rapid.T, r *modelRequest) {
	req := r.release
	now := time.Now()
	for _, s := range x.m.candidates(req.Key) {
		if h, ok := s.holds[req.Owner]; ok && x.m.liveness(h.end, call{now, now}) != free {
			t.Skip("the fresh owner holds the key again")
		}
	}
	n, err := x.b.Release(x.ctx, req)
	t1 := time.Now()
	if t1.Add(x.m.slack).Before(r.sent.Add(req.ReplyWindow)) && (err != nil || n != 0) {
		t.Fatalf("Release again(%+v) %v after the first = %d, %v; a fresh owner's last release within its ReplyWindow: want the first outcome, 0, and no change", req, t1.Sub(r.sent), n, err)
	}
	if !errors.Is(err, locker.ErrNotHeld) && (err != nil || n != 0) {
		t.Fatalf("Release again(%+v) = %d, %v; a fresh owner's last release: want ErrNotHeld (or the first outcome, 0), and no change", req, n, err)
	}
}

// renew renews a batch of 1–4 distinct (key, owner) pairs, each with a lease of its own.
func (x *machine) renew(t *rapid.T) {
	type pair struct{ key, owner string }
	pairs := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) pair {
		return pair{x.drawKey(t), x.drawOwner(t)}
	}), 1, 4, func(p pair) pair { return p }).Draw(t, "batch")
	batch := make([]locker.Renewal, len(pairs))
	for i, p := range pairs {
		batch[i] = locker.Renewal{Key: p.key, Owner: p.owner, TTL: x.drawLease(t, p.owner)}
	}
	c := call{t0: time.Now()}
	errs := x.b.Renew(x.ctx, batch)
	c.t1 = time.Now()
	if len(errs) != len(batch) {
		t.Fatalf("Renew of %d entries returned %d results", len(batch), len(errs))
	}
	for i, r := range batch {
		what := fmt.Sprintf("Renew entry %d %+v: %v", i, r, errs[i])
		if errs[i] != nil && !errors.Is(errs[i], locker.ErrNotHeld) {
			t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
		}
		x.m.step(t, r.Key, c, what, x.m.renewed(r, errs[i], c))
	}
}

// inspect inspects a key.
func (x *machine) inspect(t *rapid.T) {
	key := x.drawKey(t)
	c := call{t0: time.Now()}
	got, err := x.b.Inspect(x.ctx, key)
	c.t1 = time.Now()
	if err != nil {
		t.Fatalf("Inspect(%s): %v", key, err)
	}
	x.m.step(t, key, c, fmt.Sprintf("Inspect(%s) = %+v", key, got), x.m.inspected(got, c))
}

// forceRelease forces a key free.
func (x *machine) forceRelease(t *rapid.T) {
	key := x.drawKey(t)
	c := call{t0: time.Now()}
	removed, err := x.b.ForceRelease(x.ctx, key)
	c.t1 = time.Now()
	if err != nil {
		t.Fatalf("ForceRelease(%s): %v", key, err)
	}
	x.m.step(t, key, c, fmt.Sprintf("ForceRelease(%s) = %v", key, removed), forceReleased(removed))
}

// handOff (a HandOffer only) hands a key from an owner that holds it to another: mostly the
// exclusive holder the model knows of, once, to an owner other than it.
func (x *machine) handOff(t *rapid.T) {
	key := x.drawKey(t)
	s := x.m.candidates(key)[0]
	from := s.exclusive()
	if s.limitOf() > 0 {
		from = rapid.SampledFrom(s.owners()).Draw(t, "permit's holder")
	}
	if from == "" || rapid.IntRange(0, 3).Draw(t, "any owner") == 0 {
		from = x.drawOwner(t)
	}
	to := rapid.SampledFrom(slices.DeleteFunc(slices.Clone(x.owners), func(o string) bool { return o == from })).Draw(t, "to")
	req := locker.HandOffRequest{Key: key, From: from, To: to, TTL: x.drawLease(t, to), Fence: rapid.Bool().Draw(t, "fence")}
	c := call{t0: time.Now()}
	a, err := x.b.(locker.HandOffer).HandOff(x.ctx, req)
	c.t1 = time.Now()
	what := fmt.Sprintf("HandOff(%+v) = %+v, %v", req, a, err)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
	}
	x.m.step(t, key, c, what, x.m.handedOff(req, a, err, c))
	if err == nil {
		x.everHeld[[2]string{key, to}] = true
		delete(x.freshLock, key) // the key's latest lock came from no fresh Acquire
	}
}

// dequeue (a KindLocker only) takes an owner out of a key's queue: mostly one that the model
// has in the queue, any owner otherwise.
func (x *machine) dequeue(t *rapid.T) {
	key, owner := x.drawKey(t), ""
	if q := x.m.candidates(key)[0].entries(); len(q) > 0 && rapid.IntRange(0, 3).Draw(t, "queued owner") > 0 {
		owner = rapid.SampledFrom(q).Draw(t, "entry").owner
	} else {
		owner = x.drawOwner(t)
	}
	c := call{t0: time.Now()}
	err := x.kl.Dequeue(x.ctx, key, owner)
	c.t1 = time.Now()
	if err != nil {
		t.Fatalf("Dequeue(%s, %s): %v", key, owner, err)
	}
	x.m.step(t, key, c, fmt.Sprintf("Dequeue(%s, %s)", key, owner), x.m.dequeued(owner, c))
}

// advance lets up to 3 units of time pass.
func (x *machine) advance(t *rapid.T) {
	time.Sleep(time.Duration(rapid.Int64Range(0, int64(3*x.unit)).Draw(t, "sleep")))
}

// advanceToEnd steps to just before or just at the end of a holder's lease or of a queue entry
// or grant record: an off-by-one or rounding bug shows only at the boundary.
func (x *machine) advanceToEnd(t *rapid.T) {
	s := x.m.candidates(x.drawKey(t))[0]
	var ends []window
	for _, o := range s.owners() {
		ends = append(ends, s.holds[o].end)
	}
	for _, e := range s.entries() {
		ends = append(ends, e.end)
	}
	if len(ends) == 0 {
		t.Skip("nothing ends on the key")
	}
	end := rapid.SampledFrom(ends).Draw(t, "end")
	target := end.hi.Add(x.m.slack)
	if rapid.Bool().Draw(t, "before") {
		target = end.lo.Add(-x.m.slack - time.Nanosecond)
	}
	time.Sleep(time.Until(target))
}
