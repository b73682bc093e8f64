package conformance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hashlock/locker"
)

// machineConfig is what the runs of the state machine draw: keys and owners, and whether they
// draw the calls of a locker.KindLocker (shared, fair and waiting requests, Dequeue, HandOff on
// a locker.HandOffer, grants on a locker.Granter) and a lease length per owner.
type machineConfig struct {
	maxKeys, minOwners, maxOwners int
	kinds                         bool
	// permits draws a Semaphorer's permit requests too, on keys that each have a limit of 1 to
	// 3 permits (a request now and then asks for another limit, or for a lock).
	permits bool
	// One Acquire step in reentry, on average, is a re-entry only (Reentry): fewer where the
	// steps have other kinds of request to draw.
	reentry int
	// realTimeRuns, when positive, is how many runs a real-time backend gets (the other runs of
	// rapid.Check pass at once, until one fails: then every run is replayed and shrunk).
	realTimeRuns int32
}

var (
	// plainHolds is the machine of "Model", for any backend: exclusive holds only, by 1–4 owners
	// on 1–3 keys.
	plainHolds = machineConfig{maxKeys: 3, minOwners: 1, maxOwners: 4, reentry: 4}
	// allHolds is the machine of "Kinds/Model", for a KindLocker: plain, shared and fair holds
	// and the wait queue, by 2–3 owners on 1–2 keys. It sleeps through leases and queue
	// entries, and the suite runs on many backends: 15 runs in real time.
	allHolds = machineConfig{maxKeys: 2, minOwners: 2, maxOwners: 3, kinds: true, realTimeRuns: 15, reentry: 5}
	// permitHolds is the machine of "Semaphores/Model", for a Semaphorer: the steps of allHolds
	// and permit requests of semaphores of 1–3 permits, by 2–4 owners on 1–2 keys: 12 runs in
	// real time.
	permitHolds = machineConfig{maxKeys: 2, minOwners: 2, maxOwners: 4, kinds: true, permits: true, realTimeRuns: 12, reentry: 5}
)

// model runs the state machine of plain holds: random Acquire (sometimes re-entry only),
// Release, Renew, Inspect and ForceRelease calls, calls sent again and take-backs, by 1–4
// owners on 1–3 keys, and steps of time, each result checked against the model.
func (s *suite) model(t *testing.T) { s.check(t, plainHolds) }

// kindsModel runs the state machine of a KindLocker: the steps of model, with Acquire calls of
// both kinds (fair or not, waiting or not) and Release of both kinds, Dequeue, HandOff (on a
// HandOffer) and grants (on a Granter), by 2–3 owners on 1–2 keys, each owner with a lease
// length of its own.
func (s *suite) kindsModel(t *testing.T) { s.check(t, allHolds) }

// check runs the state machine of cfg under rapid.
func (s *suite) check(t *testing.T, cfg machineConfig) {
	var runs, failing atomic.Int32
	rapid.Check(t, func(rt *rapid.T) {
		if cfg.realTimeRuns > 0 && !s.f.Synctest {
			if failing.Load() == 0 && runs.Add(1) > cfg.realTimeRuns {
				return
			}
			defer func() {
				if r := recover(); r != nil {
					failing.Store(1) // replay and shrink every run from now on
					panic(r)
				}
			}()
		}
		run := func(rt *rapid.T) { s.newMachine(rt, cfg).run(rt) }
		if s.f.Synctest {
			rapid.SyncTest(rt, run)
			return
		}
		run(rt)
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

// modelRequest is a call with a request ID that the machine may send again: a granted (or
// taken-back) Acquire, or a Release, with the holds it reported.
type modelRequest struct {
	acquire locker.AcquireRequest
	release locker.ReleaseRequest
	holds   int
	undone  bool      // the Acquire was taken back
	sent    time.Time // when the Release was first sent
}

// machine is one run of the state machine: the backend, the model, and what the run did so far
// that later steps draw from.
type machine struct {
	runSetup
	cfg machineConfig
	b   locker.Locker
	kl  locker.KindLocker // the backend, when cfg.kinds
	m   *model
	ctx context.Context

	// ownerUnits is, with cfg.kinds, each owner's lease length in units, which most of its
	// requests and renewals ask for: readers with different leases share a key, as services
	// that share a key seldom share a TTL.
	ownerUnits map[string]time.Duration
	// keyLimits is, with cfg.permits, each key's limit, which most permit requests ask for.
	keyLimits map[string]int
	// Requests with IDs, to be sent again: every granted Acquire, every Acquire taken back
	// (granted or not: a take-back of an unknown ID leaves a tombstone), every Release that
	// released a hold.
	acquired, released []*modelRequest
	everHeld           map[[2]string]bool // (key, owner) pairs that were ever granted
	// freshLock holds, per key, the owner whose Fresh acquire made the key's latest exclusive
	// lock: its exclusive releases may claim Fresh (a fresh owner's last release is not
	// remembered).
	freshLock map[string]string
	nextID    int
}

// newMachine starts a run of cfg on a new backend.
func (s *suite) newMachine(rt *rapid.T, cfg machineConfig) *machine {
	x := &machine{cfg: cfg, b: s.f.New(rt), everHeld: make(map[[2]string]bool), freshLock: make(map[string]string)}
	x.runSetup = s.newRunSetup(rt, cfg.maxKeys, cfg.minOwners, cfg.maxOwners)
	x.m = newModel(x.slack, cfg.kinds)
	if cfg.kinds {
		kl, ok := x.b.(locker.KindLocker)
		if !ok {
			rt.Fatalf("the backend is no locker.KindLocker")
		}
		x.kl = kl
		x.ownerUnits = make(map[string]time.Duration)
		for _, o := range x.owners {
			x.ownerUnits[o] = time.Duration(rapid.IntRange(1, 6).Draw(rt, "owner's lease units"))
		}
	}
	if cfg.permits {
		if _, ok := x.b.(locker.Semaphorer); !ok {
			rt.Fatalf("the backend is no locker.Semaphorer")
		}
		x.keyLimits = make(map[string]int)
		for _, k := range x.keys {
			x.keyLimits[k] = rapid.IntRange(1, 3).Draw(rt, "key's limit")
		}
	}
	rt.Cleanup(func() {
		for _, k := range x.keys {
			_, _ = x.b.ForceRelease(context.Background(), k)
			for _, o := range x.owners {
				if x.kl != nil {
					_ = x.kl.Dequeue(context.Background(), k, o)
				}
			}
		}
	})
	return x
}

// run draws and checks steps until rapid stops.
func (x *machine) run(rt *rapid.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x.ctx = ctx
	steps := map[string]func(*rapid.T){
		"Acquire":      x.acquireStep(""),
		"AcquireAgain": x.acquireAgain,
		"Undo":         x.undo,
		"Release":      x.releaseAny,
		"ReleaseAgain": x.releaseAgain,
		"Renew":        x.renew,
		"Inspect":      x.inspect,
		"ForceRelease": x.forceRelease,
		"Advance":      x.advance,
		"AdvanceToEnd": x.advanceToEnd,
	}
	if x.kl != nil {
		steps["AcquireQueued"] = x.acquireStep("queued")
		steps["AcquireReader"] = x.acquireStep("reader")
		steps["Dequeue"] = x.dequeue
		steps["ReleaseHeld"] = x.releaseHeld // among several holders and kinds, Release seldom hits one
		if _, ok := x.b.(locker.HandOffer); ok {
			steps["HandOff"] = x.handOff
		}
	}
	if x.cfg.permits {
		steps["AcquirePermit"] = x.acquireStep("permit")
		steps["AcquirePermitQueued"] = x.acquireStep("permit queued")
		steps["AcquirePermitAny"] = x.acquireStep("permit any")
		steps["AcquirePermitGranted"] = x.acquireStep("permit granted")
	}
	rt.Repeat(steps)
}

// newID draws a new request ID, or none.
func (x *machine) newID(t *rapid.T) string {
	if !rapid.Bool().Draw(t, "with ID") {
		return ""
	}
	x.nextID++
	return fmt.Sprintf("req-%d", x.nextID)
}

// drawLease draws owner's lease: with cfg.kinds, mostly the owner's own length (with a few
// microseconds more); else, and otherwise, any (drawTTL).
func (x *machine) drawLease(t *rapid.T, owner string) time.Duration {
	if x.ownerUnits == nil || !rapid.Bool().Draw(t, "owner's lease") {
		return x.drawTTL(t)
	}
	return x.unit*x.ownerUnits[owner] + time.Duration(rapid.IntRange(0, 999).Draw(t, "micros"))*time.Microsecond
}

// drawFresh says whether an acquire of owner on key may claim Fresh: only an owner that never
// held the key, and not always.
func (x *machine) drawFresh(t *rapid.T, key, owner string) bool {
	return !x.everHeld[[2]string{key, owner}] && rapid.Bool().Draw(t, "fresh")
}

// drawLimit draws the limit of a permit request on key: mostly the key's own, now and then
// another (1 to 4).
func (x *machine) drawLimit(t *rapid.T, key string) int {
	if rapid.IntRange(0, 5).Draw(t, "another limit") > 0 {
		return x.keyLimits[key]
	}
	return rapid.IntRange(1, 4).Draw(t, "limit")
}

// drawWait draws how long a request waits: mostly not at all.
func (x *machine) drawWait(t *rapid.T) time.Duration {
	if rapid.Bool().Draw(t, "no wait") {
		return 0
	}
	return x.unit * time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units"))
}
