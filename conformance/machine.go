package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hashlock/locker"
)

// model runs the state machine: random Acquire (sometimes re-entry only), Release, Renew,
// Inspect and ForceRelease calls
// by 1–4 owners on 1–3 keys, and steps of time, each result checked against the model.
func (s *suite) model(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		if s.f.Synctest {
			rapid.SyncTest(rt, s.machine)
			return
		}
		s.machine(rt)
	})
}

// runSetup is what a run of a state machine draws first: its keys (in a fresh namespace) and
// owners, the unit of its leases (a twentieth of the suite's TTL) and its model's clock slack
// (2ms for a server clock in whole milliseconds, compared in its own way; 0 in a bubble).
type runSetup struct {
	slack, unit  time.Duration
	keys, owners []string
}

// newRunSetup draws a runSetup with 1 to maxKeys keys and minOwners to maxOwners owners.
func (s *suite) newRunSetup(rt *rapid.T, maxKeys, minOwners, maxOwners int) runSetup {
	r := runSetup{slack: 2 * time.Millisecond, unit: s.ttl / 20}
	if s.f.Synctest {
		r.slack = 0
	}
	ns := namespace()
	r.keys = make([]string, rapid.IntRange(1, maxKeys).Draw(rt, "keys"))
	for i := range r.keys {
		r.keys[i] = fmt.Sprintf("%sk%d", ns, i)
	}
	r.owners = make([]string, rapid.IntRange(minOwners, maxOwners).Draw(rt, "owners"))
	for i := range r.owners {
		r.owners[i] = fmt.Sprintf("owner-%d", i)
	}
	return r
}

func (r runSetup) drawKey(t *rapid.T) string   { return rapid.SampledFrom(r.keys).Draw(t, "key") }
func (r runSetup) drawOwner(t *rapid.T) string { return rapid.SampledFrom(r.owners).Draw(t, "owner") }

// drawTTL draws a lease from 1 to 5 units, not always whole milliseconds, to catch unit and
// rounding bugs.
func (r runSetup) drawTTL(t *rapid.T) time.Duration {
	return r.unit*time.Duration(rapid.IntRange(1, 5).Draw(t, "units")) +
		time.Duration(rapid.IntRange(0, 999).Draw(t, "micros"))*time.Microsecond
}

// machine is one run of the state machine.
func (s *suite) machine(rt *rapid.T) {
	b := s.f.New(rt)
	run := s.newRunSetup(rt, 3, 1, 4)
	m := newModel(run.slack)
	unit, keys := run.unit, run.keys
	drawKey, drawOwner, drawTTL := run.drawKey, run.drawOwner, run.drawTTL
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt.Cleanup(func() {
		for _, k := range keys {
			_, _ = b.ForceRelease(context.Background(), k)
		}
	})

	checkTTL := func(t *rapid.T, what string, got time.Duration, l *modelLock, t0, t1 time.Time) {
		lo, hi := m.ttlWindow(l, t0, t1)
		if got <= 0 || got < lo || got > hi {
			t.Fatalf("%s: remaining lease %v, want within [%v, %v] and > 0", what, got, lo, hi)
		}
	}

	// Requests with IDs, to be sent again: every granted Acquire, every Acquire taken back
	// (granted or not: a take-back of an unknown ID leaves a tombstone), every Release that
	// released a hold.
	var acquired, released []*modelRequest
	everHeld := make(map[[2]string]bool) // (key, owner) pairs that were ever granted
	// freshLock holds, per key, the owner whose Fresh acquire made the key's latest lock: its
	// releases may claim Fresh (a fresh owner's last release is not remembered).
	freshLock := make(map[string]string)
	nextID := 0
	newID := func(t *rapid.T) string {
		if !rapid.Bool().Draw(t, "with ID") {
			return ""
		}
		nextID++
		return fmt.Sprintf("req-%d", nextID)
	}
	// drawFresh says whether an acquire of owner on key may claim Fresh: only an owner that
	// never held the key, and not always.
	drawFresh := func(t *rapid.T, key, owner string) bool {
		return !everHeld[[2]string{key, owner}] && rapid.Bool().Draw(t, "fresh")
	}

	// acquire sends req and checks the outcome against the model, a re-entry of a fresh owner's
	// request (sent again) included, and follows it. A re-entry only (Reentry) adds a hold to the
	// owner's, or fails with ErrNotHeld and changes nothing: it never takes a new lock.
	acquire := func(t *rapid.T, req locker.AcquireRequest, how string) locker.Acquisition {
		key, owner := req.Key, req.Owner
		t0 := time.Now()
		a, err := b.Acquire(ctx, req)
		t1 := time.Now()
		l, st := m.state(key, t0, t1)
		held := st != free && l.owner == owner
		if req.Reentry && errors.Is(err, locker.ErrNotHeld) {
			switch {
			case held && st == live:
				t.Fatalf("%s(%+v): %v; the owner holds the key %d times, want a re-entry", how, req, err, l.holds)
			case held:
				delete(m.locks, key) // it expired during the call
			}
			return locker.Acquisition{}
		}
		if err != nil {
			t.Fatalf("%s(%+v): %v", how, req, err)
		}
		what := fmt.Sprintf("%s(%+v) = %+v", how, req, a)
		regranted := st == unknown && a.Holds == 1 && a.Token > m.fences[key] // expired, then new
		switch {
		case req.Reentry && !(held && a.Holds == l.holds+1):
			t.Fatalf("%s: a re-entry must add a hold to the owner's or fail with ErrNotHeld, never take a new lock (model: %+v)", what, l)
		case held && req.Fresh && a.Holds == l.holds && !regranted:
			// A fresh owner's hold can only come from this request, sent again: the holds stay,
			// the lease is reset.
			m.checkToken(t, what, req, false, a)
			m.set(key, owner, a.Holds, t0, t1, req.TTL)
		case held && !req.Fresh && a.Holds == l.holds+1:
			m.checkToken(t, what, req, false, a)
			m.set(key, owner, a.Holds, t0, t1, req.TTL)
		case st != live && a.Holds == 1: // free, or expired during the call
			m.checkToken(t, what, req, true, a)
			m.set(key, owner, 1, t0, t1, req.TTL)
			if req.Fresh {
				freshLock[key] = owner
			} else {
				delete(freshLock, key)
			}
		case st != free && !held && a.Holds == 0:
			checkTTL(t, what, a.TTL, l, t0, t1)
		case st == free:
			t.Fatalf("%s: the key is free, want Holds 1", what)
		case held && req.Fresh:
			t.Fatalf("%s: %s holds the key %d times from this request, want them reported unchanged", what, owner, l.holds)
		case held:
			t.Fatalf("%s: %s holds the key %d times, want Holds %d", what, owner, l.holds, l.holds+1)
		default:
			t.Fatalf("%s: %s holds the key %d times, want a refusal", what, l.owner, l.holds)
		}
		if a.Acquired() {
			everHeld[[2]string{key, owner}] = true
		}
		return a
	}

	rt.Repeat(map[string]func(*rapid.T){
		"Acquire": func(t *rapid.T) {
			key, owner, ttl := drawKey(t), drawOwner(t), drawTTL(t)
			reentry := rapid.IntRange(0, 3).Draw(t, "reentry") == 0
			req := locker.AcquireRequest{Key: key, Owner: owner, TTL: ttl, ID: newID(t),
				Fence: rapid.Bool().Draw(t, "fence"), Reentry: reentry, Fresh: !reentry && drawFresh(t, key, owner)}
			a := acquire(t, req, "Acquire")
			if req.ID != "" && a.Acquired() {
				acquired = append(acquired, &modelRequest{acquire: req, holds: a.Holds})
			}
		},
		"AcquireAgain": func(t *rapid.T) {
			// A granted (or taken back) Acquire sent again. Taken back: refused. A fresh
			// owner's: recognised by its hold, else an acquire like any other. Another owner's:
			// remembered, it changes nothing and reports the first outcome while the owner holds
			// the key, a refusal otherwise (with TTL 0 on one node; a quorum may report a
			// holder's lease seen on a node that the first call never reached).
			if len(acquired) == 0 {
				t.Skip("no Acquire with an ID yet")
			}
			r := rapid.SampledFrom(acquired).Draw(t, "request")
			req := r.acquire
			if req.Fresh && !r.undone {
				acquire(t, req, "Acquire again")
				return
			}
			t0 := time.Now()
			a, err := b.Acquire(ctx, req)
			t1 := time.Now()
			if err != nil {
				t.Fatalf("Acquire again(%+v): %v", req, err)
			}
			l, st := m.state(req.Key, t0, t1)
			what := fmt.Sprintf("Acquire again(%+v) = %+v, first %d holds, undone %v", req, a, r.holds, r.undone)
			held := st != free && l.owner == req.Owner && !r.undone
			switch {
			case held && a.Holds == r.holds:
				m.checkToken(t, what, req, false, a)
			case held && st == unknown && !a.Acquired() && a.Token == 0:
				delete(m.locks, req.Key) // it expired during the call
			case held:
				t.Fatalf("%s: want the first outcome, %d holds, and no change", what, r.holds)
			case a.Acquired() || a.Token != 0:
				t.Fatalf("%s: want a refusal, and no change", what)
			}
		},
		"Undo": func(t *rapid.T) {
			// Take back a granted Acquire, or one that never came (a fresh ID). A fresh owner's
			// take-back removes every hold of the owner (they can only come from that request).
			var r *modelRequest
			if len(acquired) > 0 && rapid.Bool().Draw(t, "known") {
				r = rapid.SampledFrom(acquired).Draw(t, "request")
			} else {
				nextID++
				key, owner := drawKey(t), drawOwner(t)
				r = &modelRequest{acquire: locker.AcquireRequest{
					Key: key, Owner: owner, TTL: drawTTL(t), ID: fmt.Sprintf("req-%d", nextID), Fresh: drawFresh(t, key, owner),
				}}
				acquired = append(acquired, r)
			}
			req := locker.ReleaseRequest{Key: r.acquire.Key, Owner: r.acquire.Owner, ID: r.acquire.ID, Undo: true, Fresh: r.acquire.Fresh}
			t0 := time.Now()
			n, err := b.Release(ctx, req)
			t1 := time.Now()
			l, st := m.state(req.Key, t0, t1)
			what := fmt.Sprintf("Release(%+v) = %d, %v; first %d holds, undone %v", req, n, err, r.holds, r.undone)
			if err != nil && !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
			}
			applies := (r.holds > 0 || req.Fresh) && !r.undone && st != free && l.owner == req.Owner
			left := 0
			if applies && !req.Fresh {
				left = l.holds - 1
			}
			r.undone = true
			switch {
			case applies && err == nil && n == left:
				if l.holds = n; n == 0 {
					delete(m.locks, req.Key)
				}
			case applies && err != nil && st == unknown:
				delete(m.locks, req.Key)
			case applies:
				t.Fatalf("%s: want the hold taken back, %d left", what, left)
			case err == nil:
				t.Fatalf("%s: nothing to take back, want ErrNotHeld", what)
			}
		},
		"ReleaseAgain": func(t *rapid.T) {
			// A Release sent again reports the first outcome and changes nothing. A fresh
			// owner's release of its last hold need be remembered only for its ReplyWindow:
			// later it may find the owner holding nothing and report ErrNotHeld (a fresh owner
			// never holds the key again; only a fresh Acquire sent again after its release,
			// which the Client never sends, gives it a new lock: such a run is skipped).
			if len(released) == 0 {
				t.Skip("no Release with an ID yet")
			}
			r := rapid.SampledFrom(released).Draw(t, "request")
			if r.release.Fresh && r.holds == 0 {
				now := time.Now()
				if l, st := m.state(r.release.Key, now, now); st != free && l.owner == r.release.Owner {
					t.Skip("the fresh owner holds the key again")
				}
				n, err := b.Release(ctx, r.release)
				t1 := time.Now()
				if t1.Add(m.slack).Before(r.sent.Add(r.release.ReplyWindow)) && (err != nil || n != 0) {
					t.Fatalf("Release again(%+v) %v after the first = %d, %v; a fresh owner's last release within its ReplyWindow: want the first outcome, 0, and no change", r.release, t1.Sub(r.sent), n, err)
				}
				if !errors.Is(err, locker.ErrNotHeld) && (err != nil || n != 0) {
					t.Fatalf("Release again(%+v) = %d, %v; a fresh owner's last release: want ErrNotHeld (or the first outcome, 0), and no change", r.release, n, err)
				}
				return
			}
			n, err := b.Release(ctx, r.release)
			if err != nil || n != r.holds {
				t.Fatalf("Release again(%+v) = %d, %v; want the first outcome, %d, and no change", r.release, n, err, r.holds)
			}
		},
		"Release": func(t *rapid.T) {
			req := locker.ReleaseRequest{Key: drawKey(t), Owner: drawOwner(t), ID: newID(t)}
			key, owner := req.Key, req.Owner
			req.Fresh = freshLock[key] == owner && rapid.Bool().Draw(t, "fresh")
			if req.Fresh {
				// None (0), one that may end during the run, or one that outlives it.
				switch rapid.IntRange(0, 2).Draw(t, "reply window") {
				case 1:
					req.ReplyWindow = drawTTL(t)
				case 2:
					req.ReplyWindow = time.Hour
				}
			}
			t0 := time.Now()
			n, err := b.Release(ctx, req)
			t1 := time.Now()
			l, st := m.state(key, t0, t1)
			what := fmt.Sprintf("Release(%+v) = %d, %v", req, n, err)
			if err != nil && !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
			}
			switch {
			case st == free || l.owner != owner:
				if err == nil {
					t.Fatalf("%s: %s does not hold the key, want ErrNotHeld", what, owner)
				}
			case err != nil && st == unknown:
				delete(m.locks, key) // it expired during the call
			case err != nil:
				t.Fatalf("%s: %s holds the key with %d, want %d left", what, owner, l.holds, l.holds-1)
			case n != l.holds-1:
				t.Fatalf("%s: want %d left", what, l.holds-1)
			case n == 0:
				delete(m.locks, key)
			default:
				l.holds = n // the lease is left as it was
			}
			if err == nil && req.ID != "" {
				released = append(released, &modelRequest{release: req, holds: n, sent: t0})
			}
		},
		"Renew": func(t *rapid.T) {
			type pair struct{ key, owner string }
			pairs := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) pair {
				return pair{drawKey(t), drawOwner(t)}
			}), 1, 4, func(p pair) pair { return p }).Draw(t, "batch")
			batch := make([]locker.Renewal, len(pairs))
			for i, p := range pairs {
				batch[i] = locker.Renewal{Key: p.key, Owner: p.owner, TTL: drawTTL(t)}
			}
			t0 := time.Now()
			errs := b.Renew(ctx, batch)
			t1 := time.Now()
			if len(errs) != len(batch) {
				t.Fatalf("Renew of %d entries returned %d results", len(batch), len(errs))
			}
			for i, r := range batch {
				err := errs[i]
				l, st := m.state(r.Key, t0, t1)
				what := fmt.Sprintf("Renew entry %d %+v: %v", i, r, err)
				if err != nil && !errors.Is(err, locker.ErrNotHeld) {
					t.Fatalf("%s: want nil or an error wrapping ErrNotHeld", what)
				}
				switch {
				case st == free || l.owner != r.Owner:
					if err == nil {
						t.Fatalf("%s: %s does not hold the key, want ErrNotHeld", what, r.Owner)
					}
				case err == nil:
					m.set(r.Key, r.Owner, l.holds, t0, t1, r.TTL)
				case st == unknown:
					delete(m.locks, r.Key)
				default:
					t.Fatalf("%s: %s holds the key, want it renewed", what, r.Owner)
				}
			}
		},
		"Inspect": func(t *rapid.T) {
			key := drawKey(t)
			t0 := time.Now()
			got, err := b.Inspect(ctx, key)
			t1 := time.Now()
			if err != nil {
				t.Fatalf("Inspect(%s): %v", key, err)
			}
			l, st := m.state(key, t0, t1)
			what := fmt.Sprintf("Inspect(%s) = %+v", key, got)
			switch {
			case st == free || (st == unknown && !got.Locked):
				if got != (locker.State{}) {
					t.Fatalf("%s: the key is free, want the zero State", what)
				}
				delete(m.locks, key)
			default:
				want := stateOf(l)
				if got.Locked != want.Locked || got.Holds != want.Holds || got.Owner != want.Owner {
					t.Fatalf("%s: want %s holding it %d times", what, l.owner, l.holds)
				}
				checkTTL(t, what, got.TTL, l, t0, t1)
			}
		},
		"ForceRelease": func(t *rapid.T) {
			key := drawKey(t)
			t0 := time.Now()
			removed, err := b.ForceRelease(ctx, key)
			t1 := time.Now()
			if err != nil {
				t.Fatalf("ForceRelease(%s): %v", key, err)
			}
			_, st := m.state(key, t0, t1)
			if st != unknown && removed != (st == live) {
				t.Fatalf("ForceRelease(%s) = %v, want %v", key, removed, st == live)
			}
			delete(m.locks, key)
		},
		"Advance": func(t *rapid.T) {
			time.Sleep(time.Duration(rapid.Int64Range(0, int64(3*unit)).Draw(t, "sleep")))
		},
		"AdvanceToExpiry": func(t *rapid.T) {
			// Step to just before or just at a lease's end: an off-by-one or rounding bug shows
			// only at the boundary.
			key := drawKey(t)
			l := m.locks[key]
			if l == nil {
				t.Skip("no lock on the key")
			}
			target := l.hi.Add(m.slack)
			if rapid.Bool().Draw(t, "before") {
				target = l.lo.Add(-m.slack - time.Nanosecond)
			}
			time.Sleep(time.Until(target))
		},
	})
}
