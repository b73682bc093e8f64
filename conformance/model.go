package conformance

import (
	"fmt"
	"strings"
	"time"
)

// model is the reference model of a Locker, and of a locker.KindLocker: per key, the holds of
// every owner (exclusive and shared), each owner's lease, the wait queue, the grant records and
// the fencing counter (see keyState). A plain Locker's key is the special case that the state
// machine of plain holds draws: one owner at a time, with exclusive holds and a lease, and no
// queue.
//
// Every owner that holds the key has a lease of its own, set by its own acquires and renewals
// only: a reader's holds end when its lease does, whatever the other readers do, and the key is
// held while any lease runs. A real-time backend is observed through calls that take time: a
// lease set by a call sent at t0 and answered at t1 ends within [t0+ttl, t1+ttl], a window, and
// so does every queue entry. Whether an item is live during a later call is then known, or
// unknown when the call and the window overlap. So the model keeps, per key, a set of
// candidate states: every state the backend may be in given what it answered so far. A call is
// checked against every candidate, and against every "world" of it, that is every choice of
// live or dead for the items (leases, queue entries) whose end may fall within the call; the
// candidates that explain the answer become the next set. A call no candidate explains is a
// failure. Inside a synctest bubble every item is known live or dead and the set has one state.
type model struct {
	slack time.Duration // clock granularity of the backend: 0 in a synctest bubble
	// early and late widen every lease's window: a KindLocker may count a lease's end on a
	// clock in whole microseconds (a Redis server's TIME: 1µs earlier) and round it up to a
	// whole millisecond where it stores it apart from the key's own TTL, as readers' leases
	// are (1ms later). A plain Locker's lease is the key's TTL: exact.
	early, late time.Duration
	keys        map[string][]*keyState
}

// newModel returns a model with every key free, for a backend whose clock is slack coarse; with
// kinds, of a KindLocker's leases (see model.early).
func newModel(slack time.Duration, kinds bool) *model {
	m := &model{slack: slack, keys: make(map[string][]*keyState)}
	if kinds {
		m.early, m.late = time.Microsecond, time.Millisecond
	}
	return m
}

// call is when a call was sent (t0) and when its answer came (t1).
type call struct{ t0, t1 time.Time }

// window is when an item (a lease, a queue entry) ends: within [lo, hi].
type window struct{ lo, hi time.Time }

// lease is the end of a lease of ttl set by call c: ttl rounded up to a whole millisecond, as
// the contract asks backends to, after c was sent and after c was answered, widened by the
// model's early and late.
func (m *model) lease(c call, ttl time.Duration) window {
	ttl = ceilMillis(ttl)
	return window{c.t0.Add(ttl - m.early), c.t1.Add(ttl + m.late)}
}

// deadline is the end of a queue entry or grant record that lasts d from call c: counted on a
// clock in whole milliseconds, 1ms either way.
func deadline(c call, d time.Duration) window {
	return window{c.t0.Add(d - time.Millisecond), c.t1.Add(d + time.Millisecond)}
}

// ceilMillis rounds d up to a whole millisecond, as the contract asks backends to.
func ceilMillis(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// liveness is whether an item is live during a call: known live, known ended (free), or
// unknown.
type liveness int

const (
	free liveness = iota
	live
	unknown
)

// liveness tells whether an item that ends within e is live during call c.
func (m *model) liveness(e window, c call) liveness {
	switch {
	case c.t1.Before(e.lo.Add(-m.slack)):
		return live
	case !c.t0.Before(e.hi.Add(m.slack)):
		return free
	default:
		return unknown
	}
}

// candidates returns the candidate states of key (a free key with an empty queue at first).
func (m *model) candidates(key string) []*keyState {
	if c := m.keys[key]; c != nil {
		return c
	}
	return []*keyState{newKeyState()}
}

// worlds returns the states s may be in during call c: every item (an owner's holds, a queue
// entry, a grant record) known to have ended is gone, and each item that may have ended during
// the call is kept in one world and gone in another.
func (m *model) worlds(s *keyState, c call) []*keyState {
	out := []*keyState{s.clone()}
	fork := func(end window, drop func(w *keyState)) {
		l := m.liveness(end, c)
		if l == live {
			return
		}
		for _, w := range out[:len(out):len(out)] {
			if l == unknown {
				out = append(out, w.clone()) // the world where it is still live
			}
			drop(w)
		}
	}
	for _, o := range s.owners() {
		fork(s.holds[o].end, func(w *keyState) { delete(w.holds, o) })
	}
	for _, e := range s.entries() {
		fork(e.end, func(w *keyState) { w.drop(e) })
	}
	return out
}

// transition is what a call does in one world: the states that explain the answer (none: the
// world does not), or why the world does not explain it.
type transition func(w *keyState) (next []*keyState, why string)

// step checks a call c on key against every candidate and world, and keeps the states that
// explain its answer. It fails the test with what when none does.
func (m *model) step(t interface{ Fatalf(string, ...any) }, key string, c call, what string, f transition) {
	var (
		next []*keyState
		seen = map[string]bool{}
		whys []string
	)
	for _, s := range m.candidates(key) {
		for _, w := range m.worlds(s, c) {
			states, why := f(w)
			if len(states) == 0 {
				whys = append(whys, fmt.Sprintf("\n  in state {%s}: %s", w.describe(c.t1), why))
			}
			for _, s := range states {
				if k := s.String(); !seen[k] {
					seen[k] = true
					next = append(next, s)
				}
			}
		}
	}
	if len(next) == 0 {
		t.Fatalf("%s: no state of the model explains it:%s", what, strings.Join(whys, ""))
	}
	if len(next) > 512 {
		t.Fatalf("%s: the model keeps %d candidate states: too much uncertainty about time", what, len(next))
	}
	m.keys[key] = next
}

// unless returns w as the one next state, or no state and why when why is not empty.
func unless(w *keyState, why string) ([]*keyState, string) {
	if why != "" {
		return nil, why
	}
	return []*keyState{w}, ""
}

// leaseOK checks a reported remaining lease, during call c, against the key's lease in w (the
// latest of its holders'): leases are counted in whole milliseconds, so one millisecond of
// rounding either way (Redis's PTTL truncates, and a live key in its last millisecond reports
// 1ms), and the clock slack.
func (m *model) leaseOK(w *keyState, got time.Duration, c call) string {
	return m.remainingOK("remaining lease", w.lease(), got, c)
}

// remainingOK checks what, a remaining lease got reported during call c, against end, the
// window of that lease's end, as leaseOK says.
func (m *model) remainingOK(what string, end window, got time.Duration, c call) string {
	lo := end.lo.Sub(c.t1) - time.Millisecond - m.slack
	hi := end.hi.Sub(c.t0) + time.Millisecond + m.slack
	if got <= 0 || got < lo || got > hi {
		return fmt.Sprintf("%s %v, want within [%v, %v] and > 0", what, got, lo, hi)
	}
	return ""
}

// setLease records a lease of ttl for owner, who holds the key, set by call c. No other
// holder's lease changes.
func (m *model) setLease(s *keyState, owner string, c call, ttl time.Duration) {
	h := s.holds[owner]
	h.end = m.lease(c, ttl)
	s.holds[owner] = h
}

// free follows the end of the last hold on the key in s by call c (a release, a take-back, a
// Dequeue of a grant): when the head of the queue asked for a grant, its owner holds the key,
// once, with the grant's lease (a new fencing token when it asked for one), or a permit of the
// semaphore of the limit it asked for (grantPermit), and a grant record takes the place of its
// entry.
func (m *model) free(s *keyState, c call) {
	if len(s.queue) == 0 || s.queue[0].grant <= 0 {
		return
	}
	head := s.queue[0]
	if head.limit > 0 {
		s.limit = head.limit
		m.grantPermit(s, c)
		return
	}
	s.queue = s.queue[1:]
	s.holds[head.owner], s.limit = ownerHolds{w: 1}, 0
	m.setLease(s, head.owner, c, head.grant)
	if head.fence {
		s.fence, s.exact = s.fence+1, false // drawn after the latest: at least one more
	}
	m.recordGrant(s, head, c)
}

// grantPermit follows the end of a permit of the semaphore in s by call c, or its first: when
// the head of the queue asked for a permit of the key's limit and one is free, its owner holds
// one, once, with the grant's lease (a token of its own, more than the key's latest, when it
// asked for one), and a grant record takes the place of its entry.
func (m *model) grantPermit(s *keyState, c call) {
	if len(s.queue) == 0 || s.queue[0].grant <= 0 || s.queue[0].limit != s.limit || len(s.holds) >= s.limit {
		return
	}
	head := s.queue[0]
	s.queue = s.queue[1:]
	h := ownerHolds{r: 1}
	if head.fence {
		h.token, h.above = s.fence, true
		s.fence, s.exact = s.fence+1, false // drawn after the latest: at least one more
	}
	s.holds[head.owner] = h
	m.setLease(s, head.owner, c, head.grant)
	m.recordGrant(s, head, c)
}

// recordGrant records, in s, the grant to head by call c, which ends with its lease.
func (m *model) recordGrant(s *keyState, head queueEntry, c call) {
	s.grants = append(s.grants, queueEntry{owner: head.owner, kind: grantRecord, end: deadline(c, ceilMillis(head.grant))})
}
