package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashlock/locker"
)

// keyState is one candidate state of a key in the model: the owners that hold it, with their
// holds and leases, its wait queue and grant records, and its fencing counter. A plain Locker's
// key has at most one owner, with exclusive holds, and no queue.
type keyState struct {
	holds  map[string]ownerHolds // the owners that hold the key; empty when free
	limit  int                   // while the key is held: a semaphore's permits; 0 for a lock
	queue  []queueEntry          // the wait queue, in arrival order
	grants []queueEntry          // grant records (locker.Granter), ending with their grant
	fence  uint64                // the key's latest fencing token
	exact  bool                  // fence is the backend's counter, not only a lower bound
}

// ownerHolds is an owner's hold count of each kind (exclusive w, shared r: a semaphore's
// permit is a shared hold), and the end of its lease: the exclusive holder's shared holds (a
// downgrade) share its lease. A permit's holder has the fencing token its permit drew (0 when
// it was taken without Fence); for a permit granted with Fence, whose token no call reported
// yet (above), token is a bound it exceeds.
type ownerHolds struct {
	w, r  int
	end   window
	token uint64
	above bool
}

func (h ownerHolds) total() int { return h.w + h.r }

// count returns the holds of the kind named.
func (h ownerHolds) count(shared bool) int {
	if shared {
		return h.r
	}
	return h.w
}

// entryKind is the kind of a queue entry, or a grant record.
type entryKind byte

const (
	fairWriter  entryKind = 'x'
	fairReader  entryKind = 's'
	writer      entryKind = 'w' // not fair
	reader      entryKind = 'r' // not fair
	grantRecord entryKind = 'g'
)

// queueEntry is an entry of the wait queue, or a grant record, that ends within end. A
// writer's entry may ask for a grant (AcquireRequest.Grant) of a lease of grant, with a fencing
// token when fence.
type queueEntry struct {
	owner string
	kind  entryKind
	end   window
	grant time.Duration
	fence bool
	limit int // the grant is of a permit of a semaphore of limit; 0: of the lock
}

// reader reports whether e is a reader's entry.
func (e queueEntry) reader() bool { return e.kind == fairReader || e.kind == reader }

// entryOf returns the queue entry that a refused request req that waits leaves, from call c.
func entryOf(req locker.AcquireRequest, c call) queueEntry {
	e := queueEntry{owner: req.Owner, kind: writer, end: deadline(c, req.Wait)}
	switch {
	case !req.Fair && req.Shared:
		e.kind = reader
	case req.Fair && req.Shared:
		e.kind = fairReader
	case req.Fair:
		e.kind = fairWriter
	}
	if req.Grant > 0 && req.Fresh && (!req.Shared || req.Limit > 0) {
		e.grant, e.fence, e.limit = req.Grant, req.Fence, req.Limit
	}
	return e
}

// newKeyState is a key that nobody holds and nobody waits for, whose fencing counter has
// drawn no token (the keys of a run are new).
func newKeyState() *keyState {
	return &keyState{holds: map[string]ownerHolds{}, exact: true}
}

func (s *keyState) clone() *keyState {
	c := *s
	c.holds = maps.Clone(s.holds)
	c.queue = slices.Clone(s.queue)
	c.grants = slices.Clone(s.grants)
	return &c
}

// owners returns the owners that hold the key, sorted.
func (s *keyState) owners() []string { return slices.Sorted(maps.Keys(s.holds)) }

// entries returns the queue entries and then the grant records.
func (s *keyState) entries() []queueEntry { return append(slices.Clone(s.queue), s.grants...) }

// exclusive returns the exclusive holder, or "" when the key is free or shared.
func (s *keyState) exclusive() string {
	for o, h := range s.holds {
		if h.w > 0 {
			return o
		}
	}
	return ""
}

// held reports whether anyone holds the key.
func (s *keyState) held() bool { return len(s.holds) > 0 }

// limitOf is the limit the key is held with: a semaphore's permits, 0 for a lock or a free key.
func (s *keyState) limitOf() int {
	if !s.held() {
		return 0
	}
	return s.limit
}

// mismatched reports whether the key is held with another limit than a request's (0: a lock).
func (s *keyState) mismatched(limit int) bool { return s.held() && s.limit != limit }

// entry returns the index of owner's queue entry, or -1.
func (s *keyState) entry(owner string) int {
	return slices.IndexFunc(s.queue, func(e queueEntry) bool { return e.owner == owner })
}

// record returns the index of owner's grant record, or -1.
func (s *keyState) record(owner string) int {
	return slices.IndexFunc(s.grants, func(e queueEntry) bool { return e.owner == owner })
}

// dequeue takes owner's entry out of the queue, or else its grant record, and reports whether
// it was a grant record.
func (s *keyState) dequeue(owner string) (granted bool) {
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

// drop removes entry e (a queue entry or a grant record) that ended.
func (s *keyState) drop(e queueEntry) {
	if e.kind == grantRecord {
		if i := s.record(e.owner); i >= 0 {
			s.grants = slices.Delete(s.grants, i, i+1)
		}
		return
	}
	if i := s.entry(e.owner); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
}

// enqueue follows a refused request that waits: it queues e, or keeps its owner's place for
// e's deadline. It returns the states that may follow: whether an entry's kind changes is not
// specified.
func (s *keyState) enqueue(e queueEntry) []*keyState {
	i := s.entry(e.owner)
	if i < 0 {
		if j := s.record(e.owner); j >= 0 {
			s.grants = slices.Delete(s.grants, j, j+1) // a grant that lapsed
		}
		s.queue = append(s.queue, e)
		return []*keyState{s}
	}
	var next []*keyState
	if s.queue[i].kind != e.kind {
		other := s.clone()
		other.queue[i] = e
		next = append(next, other)
	}
	s.queue[i].end, s.queue[i].grant, s.queue[i].fence, s.queue[i].limit = e.end, e.grant, e.fence, e.limit
	return append(next, s)
}

// lease returns the window of the end of the key's lease, when it is held: the latest of its
// holders' leases.
func (s *keyState) lease() window {
	var end window
	for _, h := range s.holds {
		if h.end.lo.After(end.lo) {
			end.lo = h.end.lo
		}
		if h.end.hi.After(end.hi) {
			end.hi = h.end.hi
		}
	}
	return end
}

// take removes one hold of owner of the kind named (all of them with all), and frees the key
// when nobody holds it any more. It reports the owner's holds left, and false when it had none
// of that kind.
func (s *keyState) take(owner string, shared, all bool) (int, bool) {
	h := s.holds[owner]
	switch {
	case all && h.total() == 0, !all && h.count(shared) == 0:
		return 0, false
	case all:
		h = ownerHolds{}
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

// admits reports whether a new hold of owner may be granted on the key in state s, as
// KindLocker says: an exclusive one on a free key, a shared one on a free or shared key, and the
// live entries ahead of owner's own (all of them when it has none) allow it — for a fair
// request, none but (for a shared one) readers'; for a plain one, none of the other kind. A
// plain exclusive request that does not wait passes the queue.
func (s *keyState) admits(owner string, shared, fair, waits bool) bool {
	if s.exclusive() != "" || (s.held() && !shared) {
		return false
	}
	if !shared && !fair && !waits {
		return true
	}
	for _, e := range s.queue {
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

// admitsPermit reports whether a new permit of a semaphore of limit may be granted to owner on
// the key in state s, as Semaphorer says: the key is free, or a semaphore (of limit: the caller
// checked) with a permit free; a fair request passes no live entry of the queue ahead of owner's
// own (all of them when it has none), a plain one passes the queue.
func (s *keyState) admitsPermit(owner string, limit int, fair bool) bool {
	if s.held() && len(s.holds) >= limit {
		return false
	}
	return !fair || len(s.queue) == 0 || s.queue[0].owner == owner
}

// soonest returns the window of the end of the first holder's lease to end: when a semaphore's
// permit may be free.
func (s *keyState) soonest() window {
	var end window
	for _, h := range s.holds {
		if end.lo.IsZero() || h.end.lo.Before(end.lo) {
			end.lo = h.end.lo
		}
		if end.hi.IsZero() || h.end.hi.Before(end.hi) {
			end.hi = h.end.hi
		}
	}
	return end
}

// permitToken checks the fencing token reported for owner's permit, which it had before the
// call (a re-entry, a request sent again, a grant taken): its own, with Fence (learnt then, for
// a grant's); none without.
func (s *keyState) permitToken(req locker.AcquireRequest, owner string, token uint64) string {
	h := s.holds[owner]
	switch {
	case !req.Fence && token != 0:
		return "a fencing token without Fence"
	case !req.Fence:
	case h.above && token <= h.token:
		return fmt.Sprintf("token %d, want a granted permit's own, more than %d", token, h.token)
	case h.above:
		h.token, h.above = token, false
		s.holds[owner] = h
	case token != h.token:
		return fmt.Sprintf("token %d, want the permit's own, %d", token, h.token)
	}
	return ""
}

// newPermitToken checks the fencing token of a new permit and follows it: with Fence, more than
// the key's latest (it becomes the latest, and the permit's own); none without.
func (s *keyState) newPermitToken(req locker.AcquireRequest, h *ownerHolds, token uint64) string {
	switch {
	case !req.Fence && token != 0:
		return "a fencing token without Fence"
	case !req.Fence:
		return ""
	case token <= s.fence:
		return fmt.Sprintf("a new permit's token %d must exceed the key's latest, %d", token, s.fence)
	}
	s.fence, s.exact, h.token = token, true, token
	return ""
}

// token checks the fencing token of a granted call for req in s and follows it: none without
// Fence; a new exclusive hold's (newWriter) exceeds the key's latest and becomes it; any other
// (re-entry, a shared hold, a call sent again) is the latest, which a shared hold never
// advances. It returns why the token is wrong, or "".
func (s *keyState) token(req locker.AcquireRequest, newWriter bool, token uint64) string {
	switch {
	case !req.Fence && token != 0:
		return "a fencing token without Fence"
	case !req.Fence:
	case newWriter && token <= s.fence:
		return fmt.Sprintf("a new exclusive hold's token %d must exceed the key's latest, %d", token, s.fence)
	case newWriter:
		s.fence, s.exact = token, true
	case s.exact && token != s.fence:
		return fmt.Sprintf("token %d, want the key's latest, %d (only a new writer advances it)", token, s.fence)
	case token < s.fence:
		return fmt.Sprintf("token %d, want at least the key's latest, %d", token, s.fence)
	default:
		s.fence, s.exact = token, true
	}
	return ""
}

// String is a canonical form of the state, to merge equal candidates.
func (s *keyState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "limit %d ", s.limitOf())
	for _, o := range s.owners() {
		h := s.holds[o]
		fmt.Fprintf(&b, "%s:%d/%d[%d, %d]#%d%v ", o, h.w, h.r, h.end.lo.UnixNano(), h.end.hi.UnixNano(), h.token, h.above)
	}
	b.WriteString("queue")
	for _, e := range s.entries() {
		fmt.Fprintf(&b, " %s:%c[%d, %d]%v%v%d", e.owner, e.kind, e.end.lo.UnixNano(), e.end.hi.UnixNano(), e.grant, e.fence, e.limit)
	}
	fmt.Fprintf(&b, " fence %d %v", s.fence, s.exact)
	return b.String()
}

// describe is the state for a failure message, with times relative to now.
func (s *keyState) describe(now time.Time) string {
	var b strings.Builder
	if !s.held() {
		b.WriteString("free")
	}
	if s.limitOf() > 0 {
		fmt.Fprintf(&b, "a semaphore of %d: ", s.limit)
	}
	for _, o := range s.owners() {
		h := s.holds[o]
		fmt.Fprintf(&b, "%s holds %d exclusive, %d shared, its lease ends in [%v, %v]", o, h.w, h.r, h.end.lo.Sub(now), h.end.hi.Sub(now))
		if h.token != 0 {
			fmt.Fprintf(&b, ", token %d", h.token)
		}
		b.WriteString("; ")
	}
	b.WriteString("queue:")
	for _, e := range s.entries() {
		fmt.Fprintf(&b, " %s %c ends in [%v, %v]", e.owner, e.kind, e.end.lo.Sub(now), e.end.hi.Sub(now))
		if e.grant > 0 {
			fmt.Fprintf(&b, " (grant %v, fence %v, limit %d)", e.grant, e.fence, e.limit)
		}
	}
	fmt.Fprintf(&b, "; fence %d (exact %v)", s.fence, s.exact)
	return b.String()
}
