package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hashlock/locker"
)

// kindsRealTimeRuns is how many runs of the kinds state machine a real-time backend gets (the
// other runs of rapid.Check pass at once): the machine sleeps through leases and queue
// entries, and the suite runs on many backends.
const kindsRealTimeRuns = 15

// kindsModel runs the state machine of a KindLocker: random Acquire calls of both kinds (fair or
// not, waiting or not, re-entry only or not), Release of both kinds, calls sent again, take-backs,
// Renew, Inspect, ForceRelease, Dequeue, HandOff (on a HandOffer) and grants (on a Granter) by
// 2–3 owners on 1–2 keys, each owner with a lease length of its own, and steps of time, each
// result checked against kindModel.
func (s *suite) kindsModel(t *testing.T) {
	var runs, failing atomic.Int32
	rapid.Check(t, func(rt *rapid.T) {
		if !s.f.Synctest && failing.Load() == 0 && runs.Add(1) > kindsRealTimeRuns {
			return
		}
		defer func() {
			if r := recover(); r != nil {
				failing.Store(1) // replay and shrink every run from now on
				panic(r)
			}
		}()
		if s.f.Synctest {
			rapid.SyncTest(rt, s.kindsMachine)
			return
		}
		s.kindsMachine(rt)
	})
}

// kindRequest is an Acquire with an ID that the machine may send again or take back.
type kindRequest struct {
	req    locker.AcquireRequest
	holds  int  // the holds it reported
	undone bool // it was taken back
}

// hasKind reports whether h has holds of the kind named.
func hasKind(h kindHolds, shared bool) bool {
	if shared {
		return h.r > 0
	}
	return h.w > 0
}

// kindsMachine is one run of the kinds state machine.
func (s *suite) kindsMachine(rt *rapid.T) {
	b, ok := s.f.New(rt).(locker.KindLocker)
	if !ok {
		rt.Fatalf("the backend is no locker.KindLocker")
	}
	run := s.newRunSetup(rt, 2, 2, 3)
	slack, unit, keys, owners := run.slack, run.unit, run.keys, run.owners
	drawKey, drawOwner, drawTTL := run.drawKey, run.drawOwner, run.drawTTL
	m := newKindModel(slack)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt.Cleanup(func() {
		for _, k := range keys {
			_, _ = b.ForceRelease(context.Background(), k)
			for _, o := range owners {
				_ = b.Dequeue(context.Background(), k, o)
			}
		}
	})

	// Every owner has a lease length of its own, which most of its requests and renewals ask
	// for: readers with different leases share a key, as services that share a key seldom share
	// a TTL.
	ownerUnits := make(map[string]time.Duration)
	for _, o := range owners {
		ownerUnits[o] = time.Duration(rapid.IntRange(1, 6).Draw(rt, "owner's lease units"))
	}
	drawLease := func(t *rapid.T, owner string) time.Duration {
		if !rapid.Bool().Draw(t, "owner's lease") {
			return drawTTL(t)
		}
		return unit*ownerUnits[owner] + time.Duration(rapid.IntRange(0, 999).Draw(t, "micros"))*time.Microsecond
	}
	drawWait := func(t *rapid.T) time.Duration {
		if rapid.Bool().Draw(t, "no wait") {
			return 0
		}
		return unit * time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units"))
	}
	var (
		acquired []*kindRequest
		released []*modelRequest
		everHeld = make(map[[2]string]bool)
		nextID   int
	)
	newID := func(t *rapid.T) string {
		if !rapid.Bool().Draw(t, "with ID") {
			return ""
		}
		nextID++
		return fmt.Sprintf("req-%d", nextID)
	}
	kindName := func(shared bool) string {
		if shared {
			return "shared"
		}
		return "exclusive"
	}

	// fenceOK checks a granted call's token in state w and follows it: none without Fence; a new
	// exclusive hold's exceeds the key's latest and becomes it; any other (re-entry, a shared
	// hold, a call sent again) is the latest, which a shared hold never advances.
	fenceOK := func(w *kindState, req locker.AcquireRequest, newWriter bool, token uint64) string {
		switch {
		case !req.Fence && token != 0:
			return "a fencing token without Fence"
		case !req.Fence:
		case newWriter && token <= w.fence:
			return fmt.Sprintf("a new exclusive hold's token %d must exceed the key's latest, %d", token, w.fence)
		case newWriter:
			w.fence, w.exact = token, true
		case w.exact && token != w.fence:
			return fmt.Sprintf("token %d, want the key's latest, %d (only a new writer advances it)", token, w.fence)
		case token < w.fence:
			return fmt.Sprintf("token %d, want at least the key's latest, %d", token, w.fence)
		default:
			w.fence, w.exact = token, true
		}
		return ""
	}
	// leaseOK checks a reported remaining lease against the key's lease in w: the latest of its
	// holders'.
	leaseOK := func(w *kindState, got time.Duration, t0, t1 time.Time) string {
		end0, end1 := w.lease()
		lo := end0.Sub(t1) - time.Millisecond - slack
		hi := end1.Sub(t0) + time.Millisecond + slack
		if got <= 0 || got < lo || got > hi {
			return fmt.Sprintf("remaining lease %v, want within [%v, %v] and > 0", got, lo, hi)
		}
		return ""
	}

	acquire := func(t *rapid.T, req locker.AcquireRequest) locker.Acquisition {
		t0 := time.Now()
		a, err := b.Acquire(ctx, req)
		t1 := time.Now()
		what := fmt.Sprintf("Acquire(%+v) = %+v, %v", req, a, err)
		if err != nil && !errors.Is(err, locker.ErrNotHeld) && !errors.Is(err, locker.ErrUpgrade) {
			t.Fatalf("%s: want nil, ErrNotHeld (a re-entry) or ErrUpgrade", what)
		}
		owner := req.Owner
		m.step(t, req.Key, t0, t1, what, func(w *kindState) ([]*kindState, string) {
			h := w.holds[owner]
			switch {
			case errors.Is(err, locker.ErrNotHeld) && req.Reentry && h.total() == 0:
				return []*kindState{w}, ""
			case errors.Is(err, locker.ErrNotHeld):
				return nil, "ErrNotHeld, but the owner holds the key or the request is no re-entry"
			case errors.Is(err, locker.ErrUpgrade) && !req.Shared && h.total() > 0 && w.exclusive() == "":
				return []*kindState{w}, "" // an upgrade changes nothing
			case errors.Is(err, locker.ErrUpgrade):
				return nil, "ErrUpgrade, but this is no exclusive request of a reader"
			case req.Reentry && h.total() == 0:
				return nil, "a re-entry of an owner that holds nothing must fail with ErrNotHeld and take no hold"
			case req.Fresh && h.total() > 0:
				// A fresh owner that holds the key was granted it (Granter): it takes the grant,
				// the lease reset; a request that reads the queue ends the grant record.
				if a.Holds != h.total() {
					return nil, fmt.Sprintf("a fresh owner holding the key %d times (a grant): want Holds %d", h.total(), h.total())
				}
				w.setLease(owner, t0, t1, req.TTL)
				if why := fenceOK(w, req, false, a.Token); why != "" {
					return nil, why
				}
				if !req.Shared && !req.Fair && req.Wait <= 0 {
					return []*kindState{w}, ""
				}
				w.dequeue(owner)
				return []*kindState{w}, ""
			case h.total() > 0 && !req.Shared && w.exclusive() == "":
				return nil, "an exclusive request of a reader (an upgrade) must fail with ErrUpgrade"
			case h.total() > 0: // re-entry, or a downgrade, whatever the queue
				if a.Holds != h.total()+1 {
					return nil, fmt.Sprintf("the owner holds the key %d times, want a re-entry, Holds %d", h.total(), h.total()+1)
				}
				if req.Shared {
					h.r++
				} else {
					h.w++
				}
				w.holds[owner] = h
				w.setLease(owner, t0, t1, req.TTL) // the owner's lease, no other's
				if why := fenceOK(w, req, false, a.Token); why != "" {
					return nil, why
				}
				return []*kindState{w}, ""
			}
			admitted := w.admits(owner, req.Shared, req.Fair, req.Wait > 0)
			s := w.clone()
			why := ""
			switch {
			case admitted && a.Holds != 1:
				why = "want a new hold, Holds 1"
			case admitted:
				s.holds[owner] = kindHolds{w: 1}
				if req.Shared {
					s.holds[owner] = kindHolds{r: 1}
				}
				s.setLease(owner, t0, t1, req.TTL)
				s.dequeue(owner) // a new hold takes its owner out of the queue
				why = fenceOK(s, req, !req.Shared, a.Token)
			case a.Holds != 0 || a.Token != 0:
				why = "want a refusal: Holds 0, no token"
			case s.held():
				why = leaseOK(s, a.TTL, t0, t1)
			case a.TTL != 0:
				why = fmt.Sprintf("the key is free but the queue refuses it: want TTL 0, not %v", a.TTL)
			}
			if why != "" {
				return nil, why
			}
			var next []*kindState
			if admitted && !req.Shared && !req.Fair && req.Wait <= 0 && w.entry(owner) >= 0 {
				// A plain exclusive request that does not wait need not read the queue (on
				// Redis it does not: its common path costs one key): the owner's own entry,
				// left by an earlier request of its that waited, may stay until it ends.
				kept := s.clone()
				kept.queue, kept.grants = slices.Clone(w.queue), slices.Clone(w.grants)
				next = append(next, kept)
			}
			if admitted || req.Wait <= 0 {
				return append(next, s), ""
			}
			// A refused request that waits queues, or keeps its place for Wait from now.
			// The deadline may be counted on a clock in whole milliseconds: 1ms either way.
			e := kindEntry{owner: owner, kind: 'w', lo: t0.Add(req.Wait - time.Millisecond), hi: t1.Add(req.Wait + time.Millisecond)}
			switch {
			case !req.Fair && req.Shared:
				e.kind = 'r'
			case req.Fair && req.Shared:
				e.kind = 's'
			case req.Fair:
				e.kind = 'x'
			}
			if req.Grant > 0 && req.Fresh && !req.Shared {
				e.grant, e.fence = req.Grant, req.Fence
			}
			i := s.entry(owner)
			if i < 0 {
				if j := s.record(owner); j >= 0 {
					s.grants = slices.Delete(s.grants, j, j+1) // a grant that lapsed
				}
				s.queue = append(s.queue, e)
				return []*kindState{s}, ""
			}
			if s.queue[i].kind != e.kind { // whether its kind changes is not specified
				other := s.clone()
				other.queue[i] = e
				next = append(next, other)
			}
			s.queue[i].lo, s.queue[i].hi, s.queue[i].grant, s.queue[i].fence = e.lo, e.hi, e.grant, e.fence
			return append(next, s), ""
		})
		if a.Acquired() {
			everHeld[[2]string{req.Key, owner}] = true
		}
		return a
	}

	release := func(t *rapid.T, req locker.ReleaseRequest, r *kindRequest) (int, error) {
		t0 := time.Now()
		n, err := b.Release(ctx, req)
		t1 := time.Now()
		what := fmt.Sprintf("Release(%+v) = %d, %v", req, n, err)
		if err != nil && !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
		}
		m.step(t, req.Key, t0, t1, what, func(w *kindState) ([]*kindState, string) {
			if r != nil && r.undone {
				if err == nil {
					return nil, "the request was taken back already: want ErrNotHeld"
				}
				return []*kindState{w}, ""
			}
			s := w.clone()
			left, held := s.take(req.Owner, req.Shared, req.Undo && req.Fresh)
			if req.Undo && req.Fresh && held && !hasKind(w.holds[req.Owner], req.Shared) {
				// A fresh owner's holds come from the request taken back, but for holds of the
				// other kind, which only a test's owner reused across requests has: either answer.
				if err != nil {
					return []*kindState{w}, ""
				}
			}
			switch {
			case !held && err == nil:
				return nil, fmt.Sprintf("the owner holds no %s hold: want ErrNotHeld", kindName(req.Shared))
			case !held:
				return []*kindState{w}, ""
			case err != nil:
				return nil, fmt.Sprintf("the owner holds the key (%+v): want %d left", w.holds[req.Owner], left)
			case n != left:
				return nil, fmt.Sprintf("want %d left", left)
			}
			if !s.held() {
				s.free(t0, t1) // the head of the queue may be granted the key
			}
			return []*kindState{s}, ""
		})
		return n, err
	}

	// acquireAction draws an Acquire: any (how ""), one that queues when refused ("queued"), or
	// a plain reader's, waiting or not ("reader").
	acquireAction := func(how string) func(t *rapid.T) {
		return func(t *rapid.T) {
			key, owner := drawKey(t), drawOwner(t)
			reentry := how == "" && rapid.IntRange(0, 4).Draw(t, "reentry") == 0
			req := locker.AcquireRequest{
				Key: key, Owner: owner, TTL: drawLease(t, owner), ID: newID(t), Fence: rapid.Bool().Draw(t, "fence"),
				Reentry: reentry, Shared: how == "reader" || rapid.Bool().Draw(t, "shared"),
				Fair: how != "reader" && rapid.Bool().Draw(t, "fair"),
			}
			switch how {
			case "queued":
				req.Wait = unit * time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units"))
			default:
				req.Wait = drawWait(t)
			}
			if _, grants := b.(locker.Granter); grants && rapid.Bool().Draw(t, "grant") {
				req.Grant = unit * time.Duration(rapid.IntRange(1, 5).Draw(t, "grant units"))
			}
			req.Fresh = !reentry && !everHeld[[2]string{key, owner}] && rapid.Bool().Draw(t, "fresh")
			if a := acquire(t, req); req.ID != "" && a.Acquired() {
				acquired = append(acquired, &kindRequest{req: req, holds: a.Holds})
			}
		}
	}

	rt.Repeat(map[string]func(*rapid.T){
		"Acquire":       acquireAction(""),
		"AcquireQueued": acquireAction("queued"),
		"AcquireReader": acquireAction("reader"),
		"ReleaseHeld": func(t *rapid.T) {
			// A Release of a hold that the model knows of (Release may name any).
			key := drawKey(t)
			type hold struct {
				owner  string
				shared bool
			}
			var holds []hold
			c := m.candidates(key)[0]
			for _, o := range slices.Sorted(maps.Keys(c.holds)) {
				if c.holds[o].w > 0 {
					holds = append(holds, hold{o, false})
				}
				if c.holds[o].r > 0 {
					holds = append(holds, hold{o, true})
				}
			}
			if len(holds) == 0 {
				t.Skip("no hold on the key")
			}
			h := rapid.SampledFrom(holds).Draw(t, "hold")
			req := locker.ReleaseRequest{Key: key, Owner: h.owner, ID: newID(t), Shared: h.shared}
			if n, err := release(t, req, nil); err == nil && req.ID != "" {
				released = append(released, &modelRequest{release: req, holds: n})
			}
		},
		"AcquireAgain": func(t *rapid.T) {
			// A granted Acquire sent again changes nothing: it reports its first outcome while
			// the owner holds the key (of that kind), a refusal once it holds nothing or the
			// request was taken back.
			again := slices.DeleteFunc(slices.Clone(acquired), func(r *kindRequest) bool { return r.req.Fresh })
			if len(again) == 0 {
				t.Skip("no granted Acquire with an ID")
			}
			r := rapid.SampledFrom(again).Draw(t, "request")
			req := r.req
			t0 := time.Now()
			a, err := b.Acquire(ctx, req)
			t1 := time.Now()
			what := fmt.Sprintf("Acquire again(%+v) = %+v, %v; first %d holds, undone %v", req, a, err, r.holds, r.undone)
			if err != nil {
				t.Fatal(what)
			}
			m.step(t, req.Key, t0, t1, what, func(w *kindState) ([]*kindState, string) {
				h := w.holds[req.Owner]
				refusal := a.Holds == 0 && a.Token == 0
				first := a.Holds == r.holds
				same := h.w
				if req.Shared {
					same = h.r
				}
				switch {
				case r.undone || h.total() == 0:
					if !refusal {
						return nil, "want a refusal and no change"
					}
				case refusal && same == 0: // the owner holds only the other kind: either answer
				case !first:
					return nil, fmt.Sprintf("want the first outcome, %d holds, and no change", r.holds)
				default:
					if why := fenceOK(w, req, false, a.Token); why != "" {
						return nil, why
					}
				}
				return []*kindState{w}, ""
			})
		},
		"Release": func(t *rapid.T) {
			req := locker.ReleaseRequest{Key: drawKey(t), Owner: drawOwner(t), ID: newID(t), Shared: rapid.Bool().Draw(t, "shared")}
			if n, err := release(t, req, nil); err == nil && req.ID != "" {
				released = append(released, &modelRequest{release: req, holds: n})
			}
		},
		"ReleaseAgain": func(t *rapid.T) {
			if len(released) == 0 {
				t.Skip("no Release with an ID yet")
			}
			r := rapid.SampledFrom(released).Draw(t, "request")
			n, err := b.Release(ctx, r.release)
			if err != nil || n != r.holds {
				t.Fatalf("Release again(%+v) = %d, %v; want the first outcome, %d, and no change", r.release, n, err, r.holds)
			}
		},
		"Undo": func(t *rapid.T) {
			// Take back a granted Acquire: one hold of its kind (a fresh owner's: every hold).
			if len(acquired) == 0 {
				t.Skip("no granted Acquire with an ID")
			}
			r := rapid.SampledFrom(acquired).Draw(t, "request")
			req := locker.ReleaseRequest{Key: r.req.Key, Owner: r.req.Owner, ID: r.req.ID, Undo: true, Fresh: r.req.Fresh, Shared: r.req.Shared}
			release(t, req, r)
			r.undone = true
		},
		"Renew": func(t *rapid.T) {
			key, owner := drawKey(t), drawOwner(t)
			ttl := drawLease(t, owner)
			t0 := time.Now()
			errs := b.Renew(ctx, []locker.Renewal{{Key: key, Owner: owner, TTL: ttl}})
			t1 := time.Now()
			if len(errs) != 1 {
				t.Fatalf("Renew of 1 entry returned %d results", len(errs))
			}
			err := errs[0]
			what := fmt.Sprintf("Renew(%s, %s, %v): %v", key, owner, ttl, err)
			if err != nil && !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
			}
			m.step(t, key, t0, t1, what, func(w *kindState) ([]*kindState, string) {
				held := w.holds[owner].total() > 0
				switch {
				case held && err != nil:
					return nil, "the owner holds the key: want it renewed"
				case !held && err == nil:
					return nil, "the owner does not hold the key: want ErrNotHeld"
				case held:
					w.setLease(owner, t0, t1, ttl) // the owner's lease, no other's
				}
				return []*kindState{w}, ""
			})
		},
		"Inspect": func(t *rapid.T) {
			key := drawKey(t)
			t0 := time.Now()
			got, err := b.Inspect(ctx, key)
			t1 := time.Now()
			if err != nil {
				t.Fatalf("Inspect(%s): %v", key, err)
			}
			m.step(t, key, t0, t1, fmt.Sprintf("Inspect(%s) = %+v", key, got), func(w *kindState) ([]*kindState, string) {
				if got.Queued != len(w.queue) {
					return nil, fmt.Sprintf("want Queued %d", len(w.queue))
				}
				if !w.held() {
					if got != (locker.State{Queued: got.Queued}) {
						return nil, "the key is free: want the zero State but Queued"
					}
					return []*kindState{w}, ""
				}
				if writer := w.exclusive(); writer != "" {
					h := w.holds[writer]
					if !got.Locked || got.Shared || got.Readers != 0 || got.Owner != writer || got.Holds != h.total() {
						return nil, fmt.Sprintf("want %s holding it exclusively %d times (shared holds included)", writer, h.total())
					}
				} else {
					sum := 0
					for _, h := range w.holds {
						sum += h.r
					}
					if _, reader := w.holds[got.Owner]; !got.Locked || !got.Shared || got.Readers != len(w.holds) || !reader || got.Holds != sum {
						return nil, fmt.Sprintf("want it shared by %d readers with %d holds, Owner one of them", len(w.holds), sum)
					}
				}
				if why := leaseOK(w, got.TTL, t0, t1); why != "" {
					return nil, why
				}
				return []*kindState{w}, ""
			})
		},
		"ForceRelease": func(t *rapid.T) {
			key := drawKey(t)
			t0 := time.Now()
			removed, err := b.ForceRelease(ctx, key)
			t1 := time.Now()
			if err != nil {
				t.Fatalf("ForceRelease(%s): %v", key, err)
			}
			m.step(t, key, t0, t1, fmt.Sprintf("ForceRelease(%s) = %v", key, removed), func(w *kindState) ([]*kindState, string) {
				if removed != w.held() {
					return nil, fmt.Sprintf("want %v", w.held())
				}
				w.holds = map[string]kindHolds{} // the queue stays
				return []*kindState{w}, ""
			})
		},
		"HandOff": func(t *rapid.T) {
			// A hand-off (a HandOffer only) from an owner that holds the key to another: mostly
			// the exclusive holder the model knows of, once, to an owner other than it.
			h, ok := b.(locker.HandOffer)
			if !ok {
				t.Skip("the backend is no locker.HandOffer")
			}
			key := drawKey(t)
			from := m.candidates(key)[0].exclusive()
			if from == "" || rapid.IntRange(0, 3).Draw(t, "any owner") == 0 {
				from = drawOwner(t)
			}
			to := rapid.SampledFrom(slices.DeleteFunc(slices.Clone(owners), func(o string) bool { return o == from })).Draw(t, "to")
			req := locker.HandOffRequest{Key: key, From: from, To: to, TTL: drawLease(t, to), Fence: rapid.Bool().Draw(t, "fence")}
			t0 := time.Now()
			a, err := h.HandOff(ctx, req)
			t1 := time.Now()
			what := fmt.Sprintf("HandOff(%+v) = %+v, %v", req, a, err)
			if err != nil && !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
			}
			fence := locker.AcquireRequest{Fence: req.Fence}
			m.step(t, key, t0, t1, what, func(w *kindState) ([]*kindState, string) {
				others := len(w.queue)
				if w.entry(to) >= 0 {
					others--
				}
				switch held := w.holds[from]; {
				case err == nil && a.Queued != others:
					return nil, fmt.Sprintf("want Queued %d (the live entries of others than To)", others)
				case w.holds[to].total() > 0: // taken as sent again
					if err != nil || a.Holds != w.holds[to].total() {
						return nil, fmt.Sprintf("To holds the key %d times: want them reported", w.holds[to].total())
					}
					w.setLease(to, t0, t1, req.TTL)
					return unless(w, fenceOK(w, fence, false, a.Token))
				case held.w == 1 && held.r == 0:
					if err != nil || a.Holds != 1 {
						return nil, "From holds the key exclusively, once: want it handed off, Holds 1"
					}
					delete(w.holds, from)
					w.holds[to] = kindHolds{w: 1}
					w.setLease(to, t0, t1, req.TTL)
					w.dequeue(to)
					return unless(w, fenceOK(w, fence, true, a.Token))
				case err == nil:
					return nil, fmt.Sprintf("From holds %+v, not one exclusive hold: want ErrNotHeld", held)
				}
				return []*kindState{w}, ""
			})
			if err == nil {
				everHeld[[2]string{key, to}] = true
			}
		},
		"Dequeue": func(t *rapid.T) {
			// Mostly an owner that the model has in the queue; any owner otherwise.
			key, owner := drawKey(t), ""
			c := m.candidates(key)[0]
			if q := append(slices.Clone(c.queue), c.grants...); len(q) > 0 && rapid.IntRange(0, 3).Draw(t, "queued owner") > 0 {
				owner = rapid.SampledFrom(q).Draw(t, "entry").owner
			} else {
				owner = drawOwner(t)
			}
			t0 := time.Now()
			err := b.Dequeue(ctx, key, owner)
			t1 := time.Now()
			if err != nil {
				t.Fatalf("Dequeue(%s, %s): %v", key, owner, err)
			}
			m.step(t, key, t0, t1, fmt.Sprintf("Dequeue(%s, %s)", key, owner), func(w *kindState) ([]*kindState, string) {
				if h := w.holds[owner]; w.dequeue(owner) && h.w == 1 && h.r == 0 {
					// A grant that owner did not take: given back, as by its release.
					delete(w.holds, owner)
					w.free(t0, t1)
				}
				return []*kindState{w}, ""
			})
		},
		"Advance": func(t *rapid.T) {
			time.Sleep(time.Duration(rapid.Int64Range(0, int64(3*unit)).Draw(t, "sleep")))
		},
		"AdvanceToEnd": func(t *rapid.T) {
			// Step to just before or just at the end of a holder's lease or of a queue entry.
			c := m.candidates(drawKey(t))[0]
			var ends [][2]time.Time
			for _, o := range slices.Sorted(maps.Keys(c.holds)) {
				ends = append(ends, [2]time.Time{c.holds[o].lo, c.holds[o].hi})
			}
			for _, e := range append(slices.Clone(c.queue), c.grants...) {
				ends = append(ends, [2]time.Time{e.lo, e.hi})
			}
			if len(ends) == 0 {
				t.Skip("nothing ends on the key")
			}
			end := rapid.SampledFrom(ends).Draw(t, "end")
			target := end[1].Add(m.slack)
			if rapid.Bool().Draw(t, "before") {
				target = end[0].Add(-m.slack - time.Nanosecond)
			}
			time.Sleep(time.Until(target))
		},
	})
}
