package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// kindModel is the reference model of a locker.KindLocker: per key, the holds of every owner
// (exclusive and shared), each owner's lease, the wait queue and the fencing counter.
//
// Every owner that holds the key has a lease of its own, set by its own acquires and renewals
// only: a reader's holds end when its lease does, whatever the other readers do, and the key is
// held while any lease runs. A real-time backend is observed through calls that take time, and
// every lease and every queue entry end at a time known only as a window (see model). So the model keeps, per key, a
// set of candidate states: every state the backend may be in given what it answered so far. A
// call is checked against every candidate, and against every "world" of it, that is every choice
// of live or dead for the items (lease, queue entries) whose end may fall within the call; the
// candidates that explain the answer become the next set. A call no candidate explains is a
// failure. Inside a synctest bubble every item is known live or dead and the set has one state.
type kindModel struct {
	slack time.Duration
	keys  map[string][]*kindState
}

// kindState is one candidate state of a key.
type kindState struct {
	holds  map[string]kindHolds // the owners that hold the key, with their leases; empty when free
	queue  []kindEntry          // the wait queue, in arrival order
	grants []kindEntry          // grant records (locker.Granter): kind 'g', ending with the grant
	fence  uint64               // the key's latest fencing token
	exact  bool                 // fence is the backend's counter, not only a lower bound
}

// kindHolds is an owner's hold count of each kind, and the end of its lease, within [lo, hi]:
// the exclusive holder's shared holds (a downgrade) share its lease.
type kindHolds struct {
	w, r   int
	lo, hi time.Time
}

func (h kindHolds) total() int { return h.w + h.r }

// kindEntry is a wait queue entry: 'x' a fair writer, 's' a fair reader, 'w' a writer that is
// not fair, 'r' a reader that is not fair; or a grant record, 'g'. It ends within [lo, hi]. A
// writer's entry may ask for a grant (AcquireRequest.Grant) of a lease of grant, with a fencing
// token when fence.
type kindEntry struct {
	owner  string
	kind   byte
	lo, hi time.Time
	grant  time.Duration
	fence  bool
}

// reader reports whether e is a reader's entry.
func (e kindEntry) reader() bool { return e.kind == 's' || e.kind == 'r' }

func newKindModel(slack time.Duration) *kindModel {
	return &kindModel{slack: slack, keys: make(map[string][]*kindState)}
}

// candidates returns the candidate states of key (a free key with an empty queue at first).
func (m *kindModel) candidates(key string) []*kindState {
	if c := m.keys[key]; c != nil {
		return c
	}
	return []*kindState{{holds: map[string]kindHolds{}}}
}

func (s *kindState) clone() *kindState {
	c := *s
	c.holds = maps.Clone(s.holds)
	c.queue = slices.Clone(s.queue)
	c.grants = slices.Clone(s.grants)
	return &c
}

// exclusive returns the exclusive holder, or "" when the key is free or shared.
func (s *kindState) exclusive() string {
	for o, h := range s.holds {
		if h.w > 0 {
			return o
		}
	}
	return ""
}

// held reports whether anyone holds the key.
func (s *kindState) held() bool { return len(s.holds) > 0 }

// entry returns the index of owner's queue entry, or -1.
func (s *kindState) entry(owner string) int {
	return slices.IndexFunc(s.queue, func(e kindEntry) bool { return e.owner == owner })
}

// dequeue takes owner's entry out of the queue, or else its grant record, and reports whether
// it was a grant record.
func (s *kindState) dequeue(owner string) (granted bool) {
	if i := s.entry(owner); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		return false
	}
	if i := s.record(owner); i >= 0 {
		s.grants = slices.Delete(s.grants, i, i+1)
		return true
	}
	return false
}

// record returns the index of owner's grant record, or -1.
func (s *kindState) record(owner string) int {
	return slices.IndexFunc(s.grants, func(e kindEntry) bool { return e.owner == owner })
}

// free follows the end of the last hold on the key by a call from t0 to t1 (a release, a
// take-back, a Dequeue of a grant): when the head of the queue asked for a grant, its owner
// holds the key, once, with the grant's lease (a new fencing token when it asked for one), and a
// grant record takes the place of its entry.
func (s *kindState) free(t0, t1 time.Time) {
	if len(s.queue) == 0 || s.queue[0].grant <= 0 {
		return
	}
	head := s.queue[0]
	s.queue = s.queue[1:]
	s.holds[head.owner] = kindHolds{w: 1}
	s.setLease(head.owner, t0, t1, head.grant)
	if head.fence {
		s.fence, s.exact = s.fence+1, false // drawn after the latest: at least one more
	}
	g := ceilMillis(head.grant)
	// The record's end is counted on a clock in whole milliseconds: 1ms either way.
	s.grants = append(s.grants, kindEntry{owner: head.owner, kind: 'g', lo: t0.Add(g - time.Millisecond), hi: t1.Add(g + time.Millisecond)})
}

// drop removes entry e (a queue entry or a grant record) that ended.
func (s *kindState) drop(e kindEntry) {
	if e.kind == 'g' {
		if i := s.record(e.owner); i >= 0 {
			s.grants = slices.Delete(s.grants, i, i+1)
		}
		return
	}
	if i := s.entry(e.owner); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
}

// setLease records a lease of ttl for owner, who holds the key, set by a call from t0 to t1.
// No other holder's lease changes. Its end may be counted on a clock in whole microseconds (a
// Redis server's TIME: 1µs earlier), and a backend may round it up to a whole millisecond when
// it stores it apart from the key's own TTL (1ms later).
func (s *kindState) setLease(owner string, t0, t1 time.Time, ttl time.Duration) {
	ttl = ceilMillis(ttl)
	h := s.holds[owner]
	h.lo, h.hi = t0.Add(ttl-time.Microsecond), t1.Add(ttl+time.Millisecond)
	s.holds[owner] = h
}

// lease returns the window of the end of the key's lease, when it is held: the latest of its
// holders' leases.
func (s *kindState) lease() (lo, hi time.Time) {
	for _, h := range s.holds {
		if h.lo.After(lo) {
			lo = h.lo
		}
		if h.hi.After(hi) {
			hi = h.hi
		}
	}
	return lo, hi
}

// take removes one hold of owner of the kind named (all of them with all), and frees the key
// when nobody holds it any more. It reports the owner's holds left, and false when it had none
// of that kind.
func (s *kindState) take(owner string, shared, all bool) (int, bool) {
	h := s.holds[owner]
	switch {
	case all && h.total() == 0, !all && shared && h.r == 0, !all && !shared && h.w == 0:
		return 0, false
	case all:
		h = kindHolds{}
	case shared:
		h.r--
	default:
		h.w-- // at 0 with shared holds left: the key passes to shared mode, the owner's lease unchanged
	}
	if h.total() == 0 {
		delete(s.holds, owner)
	} else {
		s.holds[owner] = h
	}
	return h.total(), true
}

// String is a canonical form of the state, to merge equal candidates.
func (s *kindState) String() string {
	var b strings.Builder
	for _, o := range slices.Sorted(maps.Keys(s.holds)) {
		h := s.holds[o]
		fmt.Fprintf(&b, "%s:%d/%d[%d, %d] ", o, h.w, h.r, h.lo.UnixNano(), h.hi.UnixNano())
	}
	b.WriteString("queue")
	for _, e := range append(slices.Clone(s.queue), s.grants...) {
		fmt.Fprintf(&b, " %s:%c[%d, %d]%v%v", e.owner, e.kind, e.lo.UnixNano(), e.hi.UnixNano(), e.grant, e.fence)
	}
	fmt.Fprintf(&b, " fence %d %v", s.fence, s.exact)
	return b.String()
}

// describe is the state for a failure message, with times relative to now.
func (s *kindState) describe(now time.Time) string {
	var b strings.Builder
	if !s.held() {
		b.WriteString("free")
	}
	for _, o := range slices.Sorted(maps.Keys(s.holds)) {
		h := s.holds[o]
		fmt.Fprintf(&b, "%s holds %d exclusive, %d shared, its lease ends in [%v, %v]; ", o, h.w, h.r, h.lo.Sub(now), h.hi.Sub(now))
	}
	b.WriteString("queue:")
	for _, e := range append(slices.Clone(s.queue), s.grants...) {
		fmt.Fprintf(&b, " %s %c ends in [%v, %v]", e.owner, e.kind, e.lo.Sub(now), e.hi.Sub(now))
		if e.grant > 0 {
			fmt.Fprintf(&b, " (grant %v, fence %v)", e.grant, e.fence)
		}
	}
	fmt.Fprintf(&b, "; fence %d (exact %v)", s.fence, s.exact)
	return b.String()
}

// liveness tells whether an item that ends within [lo, hi] is live during a call from t0 to t1.
func (m *kindModel) liveness(lo, hi, t0, t1 time.Time) liveness {
	switch {
	case t1.Before(lo.Add(-m.slack)):
		return live
	case !t0.Before(hi.Add(m.slack)):
		return free
	default:
		return unknown
	}
}

// worlds returns the states s may be in during a call from t0 to t1: every item (an owner's
// holds, a queue entry) known to have ended is gone, and each item that may have ended during
// the call is kept in one world and gone in another.
func (m *kindModel) worlds(s *kindState, t0, t1 time.Time) []*kindState {
	out := []*kindState{s.clone()}
	fork := func(lo, hi time.Time, drop func(w *kindState)) {
		l := m.liveness(lo, hi, t0, t1)
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
	for _, o := range slices.Sorted(maps.Keys(s.holds)) {
		h := s.holds[o]
		fork(h.lo, h.hi, func(w *kindState) { delete(w.holds, o) })
	}
	for _, e := range append(slices.Clone(s.queue), s.grants...) {
		fork(e.lo, e.hi, func(w *kindState) { w.drop(e) })
	}
	return out
}

// kindStep is what a call does in one world: the states that explain the answer (none: the
// world does not), or why the world does not explain it.
type kindStep func(w *kindState) (next []*kindState, why string)

// step checks a call on key that ran from t0 to t1 against every candidate and world, and
// keeps the states that explain its answer. It fails the test with what when none does.
func (m *kindModel) step(t interface{ Fatalf(string, ...any) }, key string, t0, t1 time.Time, what string, f kindStep) {
	var (
		next []*kindState
		seen = map[string]bool{}
		whys []string
	)
	for _, c := range m.candidates(key) {
		for _, w := range m.worlds(c, t0, t1) {
			states, why := f(w)
			if len(states) == 0 {
				whys = append(whys, fmt.Sprintf("\n  in state {%s}: %s", w.describe(t1), why))
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
func unless(w *kindState, why string) ([]*kindState, string) {
	if why != "" {
		return nil, why
	}
	return []*kindState{w}, ""
}

// admits reports whether a new hold of owner may be granted on the key in state w, as
// KindLocker says: an exclusive one on a free key, a shared one on a free or shared key, and the
// live entries ahead of owner's own (all of them when it has none) allow it — for a fair
// request, none but (for a shared one) readers'; for a plain one, none of the other kind. A
// plain exclusive request that does not wait passes the queue.
func (w *kindState) admits(owner string, shared, fair, waits bool) bool {
	if w.exclusive() != "" || (w.held() && !shared) {
		return false
	}
	if !shared && !fair && !waits {
		return true
	}
	for _, e := range w.queue {
		switch {
		case e.owner == owner:
			return true
		case fair && !(shared && e.reader()):
			return false
		case !fair && shared != e.reader():
			return false
		}
	}
	return true
}
