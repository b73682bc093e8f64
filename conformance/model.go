package conformance

import (
	"time"

	"github.com/hashlock/locker"
)

// model is the reference model of a Locker: per key, the owner, its hold count and when the
// lease ends. A real-time backend is observed through calls that take time, so the model keeps
// the expiry as a window [lo, hi]: the lease was set by a call sent at lo-ttl and answered at
// hi-ttl. Whether a key is live during a call that ran from t0 to t1 is then known, unknown (the
// call and the expiry overlap: either outcome is accepted and the model follows it), or known
// free.
type model struct {
	slack  time.Duration // clock granularity of the backend: 0 in a synctest bubble
	locks  map[string]*modelLock
	fences map[string]uint64 // the latest fencing token of each key
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

type modelLock struct {
	owner  string
	holds  int
	lo, hi time.Time
}

type liveness int

const (
	free liveness = iota
	live
	unknown
)

func newModel(slack time.Duration) *model {
	return &model{slack: slack, locks: make(map[string]*modelLock), fences: make(map[string]uint64)}
}

// state returns the model's lock on key and whether it is live during a call from t0 to t1. A
// lock known to have expired is dropped.
func (m *model) state(key string, t0, t1 time.Time) (*modelLock, liveness) {
	l := m.locks[key]
	switch {
	case l == nil:
		return nil, free
	case t1.Before(l.lo.Add(-m.slack)):
		return l, live
	case !t0.Before(l.hi.Add(m.slack)):
		delete(m.locks, key)
		return nil, free
	default:
		return l, unknown
	}
}

// checkToken checks the fencing token of a granted Acquire: none without Fence; with it, a new
// lock's token exceeds every earlier token of the key (and becomes the latest), and a
// re-entry's is the key's latest.
func (m *model) checkToken(t interface{ Fatalf(string, ...any) }, what string, req locker.AcquireRequest, fresh bool, a locker.Acquisition) {
	latest := m.fences[req.Key]
	switch {
	case !req.Fence && a.Token != 0:
		t.Fatalf("%s: a fencing token without Fence", what)
	case !req.Fence:
	case fresh && a.Token <= latest:
		t.Fatalf("%s: a new lock's fencing token must exceed the key's latest, %d", what, latest)
	case fresh:
		m.fences[req.Key] = a.Token
	case a.Token != latest:
		t.Fatalf("%s: a re-entry's fencing token must be the key's latest, %d", what, latest)
	}
}

// set records that owner holds key with holds, with a lease of ttl set by a call from t0 to t1.
func (m *model) set(key, owner string, holds int, t0, t1 time.Time, ttl time.Duration) {
	ttl = ceilMillis(ttl)
	m.locks[key] = &modelLock{owner: owner, holds: holds, lo: t0.Add(ttl), hi: t1.Add(ttl)}
}

// ttlWindow returns the remaining lease a backend may report for l during a call from t0 to t1:
// leases are counted in whole milliseconds, so one millisecond of rounding either way (Redis's
// PTTL truncates, and a live key in its last millisecond reports 1ms), and the clock slack.
func (m *model) ttlWindow(l *modelLock, t0, t1 time.Time) (lo, hi time.Duration) {
	return l.lo.Sub(t1) - time.Millisecond - m.slack, l.hi.Sub(t0) + time.Millisecond + m.slack
}

// ceilMillis rounds d up to a whole millisecond, as the contract asks backends to.
func ceilMillis(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// stateOf is the State the model expects for a live lock, but for the TTL.
func stateOf(l *modelLock) locker.State {
	return locker.State{Locked: true, Owner: l.owner, Holds: l.holds}
}
