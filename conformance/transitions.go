package conformance

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hashlock/locker"
)

// The transitions of the model: what each call, with the answer the backend gave, does to a
// key's state in one world, as the contract of Locker, KindLocker, HandOffer and Granter says.

// plainRequest reports whether req is a plain exclusive request that does not wait, or a plain
// permit request that does not wait: it need not read the queue.
func plainRequest(req locker.AcquireRequest) bool {
	return (!req.Shared || req.Limit > 0) && !req.Fair && req.Wait <= 0
}

// normalized is req as a backend reads it: a permit request (Limit) is a shared one.
func normalized(req locker.AcquireRequest) locker.AcquireRequest {
	if req.Limit > 0 {
		req.Shared = true
	}
	return req
}

// kindName names the kind of a hold.
func kindName(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}

// acquired is the transition of an Acquire of req that call c answered with a, err (nil,
// ErrNotHeld, ErrUpgrade or ErrLimitMismatch).
func (m *model) acquired(req locker.AcquireRequest, a locker.Acquisition, err error, c call) transition {
	req = normalized(req)
	return func(w *keyState) ([]*keyState, string) {
		h := w.holds[req.Owner]
		switch {
		case err != nil:
			return acquireFailed(w, req, err)
		case w.mismatched(req.Limit):
			return nil, fmt.Sprintf("the key is held with limit %d (0: a lock), the request's is %d: want ErrLimitMismatch and no change", w.limit, req.Limit)
		case req.Reentry && h.total() == 0:
			return nil, "a re-entry of an owner that holds nothing must fail with ErrNotHeld and take no hold"
		case req.Fresh && h.total() > 0:
			return m.freshHolder(w, req, a, c)
		case h.total() > 0 && !req.Shared && w.exclusive() == "":
			return nil, "an exclusive request of a reader (an upgrade) must fail with ErrUpgrade"
		case h.total() > 0: // re-entry, or a downgrade, whatever the queue
			return m.reentered(w, req, a, c)
		case req.Limit > 0:
			return m.newPermit(w, req, a, c)
		}
		return m.newHold(w, req, a, c)
	}
}

// acquireFailed explains an Acquire that failed with err, ErrNotHeld, ErrUpgrade or
// ErrLimitMismatch: a request with another limit than the key is held with (checked first), a
// re-entry of an owner that holds nothing, or an upgrade, which change nothing.
func acquireFailed(w *keyState, req locker.AcquireRequest, err error) ([]*keyState, string) {
	h := w.holds[req.Owner]
	switch mismatched := w.mismatched(req.Limit); {
	case errors.Is(err, locker.ErrLimitMismatch) && mismatched:
		return []*keyState{w}, ""
	case errors.Is(err, locker.ErrLimitMismatch):
		return nil, fmt.Sprintf("ErrLimitMismatch, but the key is held with limit %d (0: a lock) and the request's is %d", w.limitOf(), req.Limit)
	case mismatched:
		return nil, fmt.Sprintf("the key is held with limit %d (0: a lock), the request's is %d: want ErrLimitMismatch", w.limit, req.Limit)
	case errors.Is(err, locker.ErrNotHeld) && req.Reentry && h.total() == 0:
		return []*keyState{w}, ""
	case errors.Is(err, locker.ErrNotHeld):
		return nil, "ErrNotHeld, but the owner holds the key or the request is no re-entry"
	case !req.Shared && h.total() > 0 && w.exclusive() == "":
		return []*keyState{w}, "" // an upgrade changes nothing
	}
	return nil, "ErrUpgrade, but this is no exclusive request of a reader"
}

// freshHolder explains an Acquire of a fresh owner that holds the key: its request sent again
// (its reply was lost), or on a Granter the request after a grant. It takes the hold it has, the
// lease reset; a request that reads the queue ends the grant record.
func (m *model) freshHolder(w *keyState, req locker.AcquireRequest, a locker.Acquisition, c call) ([]*keyState, string) {
	h := w.holds[req.Owner]
	if a.Holds != h.total() {
		return nil, fmt.Sprintf("a fresh owner holding the key %d times (its request sent again, or a grant): want Holds %d", h.total(), h.total())
	}
	m.setLease(w, req.Owner, c, req.TTL)
	why := ""
	if req.Limit > 0 {
		why = w.permitToken(req, req.Owner, a.Token)
	} else {
		why = w.token(req, false, a.Token)
	}
	if why != "" {
		return nil, why
	}
	if !plainRequest(req) {
		w.dequeue(req.Owner)
	} else if req.Limit > 0 && (w.entry(req.Owner) >= 0 || w.record(req.Owner) >= 0) {
		// A plain permit request need not read the queue: it may leave the owner's entry or
		// grant record as it is, or end it.
		ended := w.clone()
		ended.dequeue(req.Owner)
		return []*keyState{w, ended}, ""
	}
	return []*keyState{w}, ""
}

// reentered explains an Acquire of an owner that holds the key: one more hold of the kind
// asked, the owner's lease reset (no other's), the key's latest token.
func (m *model) reentered(w *keyState, req locker.AcquireRequest, a locker.Acquisition, c call) ([]*keyState, string) {
	h := w.holds[req.Owner]
	if a.Holds != h.total()+1 {
		return nil, fmt.Sprintf("the owner holds the key %d times, want a re-entry, Holds %d", h.total(), h.total()+1)
	}
	if req.Shared {
		h.r++
	} else {
		h.w++
	}
	w.holds[req.Owner] = h
	m.setLease(w, req.Owner, c, req.TTL)
	if req.Limit > 0 {
		return unless(w, w.permitToken(req, req.Owner, a.Token))
	}
	return unless(w, w.token(req, false, a.Token))
}

// newPermit explains a permit request of an owner that holds nothing on a key that is free or
// a semaphore of req.Limit: a new permit when one is free and the queue admits it (its own
// lease, and with Fence a new token), else a refusal with the soonest of the holders' leases and
// the permits taken, and a request that waits queues.
func (m *model) newPermit(w *keyState, req locker.AcquireRequest, a locker.Acquisition, c call) ([]*keyState, string) {
	admitted := w.admitsPermit(req.Owner, req.Limit, req.Fair)
	s := w.clone()
	why := ""
	switch {
	case admitted && a.Holds != 1:
		why = "want a new permit, Holds 1"
	case admitted:
		h := ownerHolds{r: 1}
		why = s.newPermitToken(req, &h, a.Token)
		s.holds[req.Owner], s.limit = h, req.Limit
		m.setLease(s, req.Owner, c, req.TTL)
		s.dequeue(req.Owner) // a new hold takes its owner out of the queue
	case a.Holds != 0 || a.Token != 0:
		why = "want a refusal: Holds 0, no token"
	case a.Taken != len(s.holds):
		why = fmt.Sprintf("a refused permit request: want Taken %d (the permits taken), not %d", len(s.holds), a.Taken)
	case s.held():
		why = m.remainingOK("the soonest permit's remaining lease", s.soonest(), a.TTL, c)
	case a.TTL != 0:
		why = fmt.Sprintf("the key is free but the queue refuses it: want TTL 0, not %v", a.TTL)
	}
	if why != "" {
		return nil, why
	}
	return afterNew(w, s, req, admitted, c), ""
}

// newHold explains an Acquire of an owner that holds nothing: a new hold when the key and its
// queue admit it, else a refusal with the holders' lease, and a request that waits queues.
func (m *model) newHold(w *keyState, req locker.AcquireRequest, a locker.Acquisition, c call) ([]*keyState, string) {
	admitted := w.admits(req.Owner, req.Shared, req.Fair, req.Wait > 0)
	s := w.clone()
	why := ""
	switch {
	case admitted && a.Holds != 1:
		why = "want a new hold, Holds 1"
	case admitted:
		s.holds[req.Owner], s.limit = ownerHolds{w: 1}, 0
		if req.Shared {
			s.holds[req.Owner] = ownerHolds{r: 1}
		}
		m.setLease(s, req.Owner, c, req.TTL)
		s.dequeue(req.Owner) // a new hold takes its owner out of the queue
		why = s.token(req, !req.Shared, a.Token)
	case a.Holds != 0 || a.Token != 0 || a.Taken != 0:
		why = "want a refusal: Holds 0, no token, Taken 0 (not a permit request)"
	case s.held():
		why = m.leaseOK(s, a.TTL, c)
	case a.TTL != 0:
		why = fmt.Sprintf("the key is free but the queue refuses it: want TTL 0, not %v", a.TTL)
	}
	if why != "" {
		return nil, why
	}
	return afterNew(w, s, req, admitted, c), ""
}

// afterNew returns the states that follow a request req for a new hold (a lock's or a permit)
// by call c, in world w, once s (a clone of w) has the hold when admitted. A plain request that
// does not wait need not read the queue (on Redis it does not: a plain Lock's common path costs
// one key): the owner's own entry, left by an earlier request of its that waited, may stay
// until it ends. A refused request that waits queues, or keeps its place for Wait from now.
func afterNew(w, s *keyState, req locker.AcquireRequest, admitted bool, c call) []*keyState {
	var next []*keyState
	if admitted && plainRequest(req) && w.entry(req.Owner) >= 0 {
		kept := s.clone()
		kept.queue, kept.grants = slices.Clone(w.queue), slices.Clone(w.grants)
		next = append(next, kept)
	}
	if admitted || req.Wait <= 0 {
		return append(next, s)
	}
	return s.enqueue(entryOf(req, c))
}

// sentAgain is the transition of r, a granted (or taken back) Acquire that is not a fresh
// owner's, sent again and answered with a: it changes nothing, and reports its first outcome
// while the owner holds the key (of that kind), a refusal once it holds nothing or the request
// was taken back.
func sentAgain(r *modelRequest, a locker.Acquisition, err error) transition {
	req := normalized(r.acquire)
	return func(w *keyState) ([]*keyState, string) {
		h := w.holds[req.Owner]
		refusal := a.Holds == 0 && a.Token == 0
		switch mismatched := w.mismatched(req.Limit); {
		case err != nil:
			if !errors.Is(err, locker.ErrLimitMismatch) || !mismatched {
				return nil, "want no error (ErrLimitMismatch only while the key is held with another limit)"
			}
		case mismatched && (refusal || a.Holds == r.holds):
			// The owner holds the key with another limit than the request's (an owner token
			// reused across kinds): ErrLimitMismatch, or the first outcome of its marker, whose
			// token is not the request's kind's.
		case r.undone || h.total() == 0:
			if !refusal {
				return nil, "want a refusal and no change"
			}
		case refusal && h.count(req.Shared) == 0: // the owner holds only the other kind: either answer
		case a.Holds != r.holds:
			return nil, fmt.Sprintf("want the first outcome, %d holds, and no change", r.holds)
		case req.Limit > 0:
			return unless(w, w.permitToken(req, req.Owner, a.Token))
		default:
			return unless(w, w.token(req, false, a.Token))
		}
		return []*keyState{w}, ""
	}
}

// released is the transition of a Release of req that call c answered with n, err (nil or
// ErrNotHeld). For a take-back (req.Undo), r is the Acquire taken back: its hold, of its kind
// (a fresh owner's: every hold), is removed unless it was never granted (an ID that never came)
// or was taken back already.
func (m *model) released(req locker.ReleaseRequest, r *modelRequest, n int, err error, c call) transition {
	return func(w *keyState) ([]*keyState, string) {
		if r != nil && (r.undone || (r.holds == 0 && !r.acquire.Fresh)) {
			if err == nil {
				return nil, "the request was taken back already, or never granted: want ErrNotHeld"
			}
			return []*keyState{w}, ""
		}
		s := w.clone()
		all := req.Undo && req.Fresh
		left, held := s.take(req.Owner, req.Shared, all)
		switch {
		case all && held && err != nil && w.holds[req.Owner].count(req.Shared) == 0:
			// A fresh owner's holds come from the request taken back, but for holds of the
			// other kind, which only a test's owner reused across requests has: either answer.
			return []*keyState{w}, ""
		case !held && err == nil:
			return nil, fmt.Sprintf("the owner holds no %s hold: want ErrNotHeld", kindName(req.Shared))
		case !held:
			return []*keyState{w}, ""
		case err != nil:
			return nil, fmt.Sprintf("the owner holds the key (%+v): want %d left", w.holds[req.Owner], left)
		case n != left:
			return nil, fmt.Sprintf("want %d left", left)
		}
		switch {
		case !s.held():
			m.free(s, c) // the head of the queue may be granted the key
		case left == 0 && s.limit > 0:
			m.grantPermit(s, c) // or the permit freed
		}
		return []*keyState{s}, ""
	}
}

// renewed is the transition of the renewal r of a Renew batch that call c answered with err
// (nil or ErrNotHeld): the owner's lease, no other's.
func (m *model) renewed(r locker.Renewal, err error, c call) transition {
	return func(w *keyState) ([]*keyState, string) {
		held := w.holds[r.Owner].total() > 0
		switch {
		case held && err != nil:
			return nil, "the owner holds the key: want it renewed"
		case !held && err == nil:
			return nil, "the owner does not hold the key: want ErrNotHeld"
		case held:
			m.setLease(w, r.Owner, c, r.TTL)
		}
		return []*keyState{w}, ""
	}
}

// inspected is the transition of an Inspect that call c answered with got: it changes nothing,
// and reports the holders, their holds, the key's lease and the live queue entries.
func (m *model) inspected(got locker.State, c call) transition {
	return func(w *keyState) ([]*keyState, string) {
		if got.Queued != len(w.queue) {
			return nil, fmt.Sprintf("want Queued %d", len(w.queue))
		}
		if !w.held() {
			if !freeState(got) {
				return nil, "the key is free: want the zero State but Queued"
			}
			return []*keyState{w}, ""
		}
		if why := m.holdersOK(w, got.Holders, c); why != "" {
			return nil, why
		}
		if got.Limit != w.limit {
			return nil, fmt.Sprintf("want Limit %d (0: a lock)", w.limit)
		}
		if w.limit > 0 {
			sum := 0
			for _, h := range w.holds {
				sum += h.r
			}
			if _, holder := w.holds[got.Owner]; !got.Locked || got.Shared || got.Readers != 0 || !holder || got.Holds != sum {
				return nil, fmt.Sprintf("want a semaphore with %d holders and %d holds, Owner one of them, Shared false and Readers 0", len(w.holds), sum)
			}
			return unless(w, m.leaseOK(w, got.TTL, c))
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
		return unless(w, m.leaseOK(w, got.TTL, c))
	}
}

// freeState reports whether st is the State of a free key: zero, but for Queued.
func freeState(st locker.State) bool {
	st.Queued = 0
	return !st.Locked && st.Owner == "" && st.Holds == 0 && st.TTL == 0 && !st.Shared && st.Readers == 0 &&
		st.Limit == 0 && len(st.Holders) == 0
}

// holdersOK checks the holders Inspect reported during call c against w: every owner that holds
// the key, sorted by owner token, with its holds of both kinds and a remaining lease of its own
// within its window (as leaseOK allows).
func (m *model) holdersOK(w *keyState, got []locker.Holder, c call) string {
	owners := w.owners()
	if len(got) != len(owners) {
		return fmt.Sprintf("Holders %+v: want %d of them, %v", got, len(owners), owners)
	}
	for i, o := range owners {
		h := w.holds[o]
		if got[i].Owner != o || got[i].Holds != h.total() {
			return fmt.Sprintf("Holders %+v: want %s with %d holds at %d (sorted by owner)", got, o, h.total(), i)
		}
		if why := m.remainingOK(fmt.Sprintf("Holders %+v: %s's remaining lease", got, o), h.end, got[i].TTL, c); why != "" {
			return why
		}
	}
	return ""
}

// forceReleased is the transition of a ForceRelease answered with removed: every hold is gone,
// the queue stays.
func forceReleased(removed bool) transition {
	return func(w *keyState) ([]*keyState, string) {
		if removed != w.held() {
			return nil, fmt.Sprintf("want %v", w.held())
		}
		w.holds = map[string]ownerHolds{}
		return []*keyState{w}, ""
	}
}

// handedOff is the transition of a HandOff of req that call c answered with a, err (nil or
// ErrNotHeld).
func (m *model) handedOff(req locker.HandOffRequest, a locker.HandOffResult, err error, c call) transition {
	fence := locker.AcquireRequest{Fence: req.Fence}
	return func(w *keyState) ([]*keyState, string) {
		others := len(w.queue)
		if w.entry(req.To) >= 0 {
			others--
		}
		switch held := w.holds[req.From]; {
		case err == nil && a.Queued != others:
			return nil, fmt.Sprintf("want Queued %d (the live entries of others than To)", others)
		case w.holds[req.To].total() > 0: // taken as sent again
			if err != nil || a.Holds != w.holds[req.To].total() {
				return nil, fmt.Sprintf("To holds the key %d times: want them reported", w.holds[req.To].total())
			}
			m.setLease(w, req.To, c, req.TTL)
			if w.limit > 0 {
				fence.Owner = req.To
				return unless(w, w.permitToken(fence, req.To, a.Token))
			}
			return unless(w, w.token(fence, false, a.Token))
		case w.limit > 0 && held.w == 0 && held.r == 1:
			if err != nil || a.Holds != 1 {
				return nil, "From holds one permit, once: want it handed off, Holds 1"
			}
			delete(w.holds, req.From)
			h := ownerHolds{r: 1}
			why := w.newPermitToken(fence, &h, a.Token)
			w.holds[req.To] = h
			m.setLease(w, req.To, c, req.TTL)
			w.dequeue(req.To)
			return unless(w, why)
		case held.w == 1 && held.r == 0:
			if err != nil || a.Holds != 1 {
				return nil, "From holds the key exclusively, once: want it handed off, Holds 1"
			}
			delete(w.holds, req.From)
			w.holds[req.To], w.limit = ownerHolds{w: 1}, 0
			m.setLease(w, req.To, c, req.TTL)
			w.dequeue(req.To)
			return unless(w, w.token(fence, true, a.Token))
		case err == nil:
			return nil, fmt.Sprintf("From holds %+v, not one exclusive hold nor one permit: want ErrNotHeld", held)
		}
		return []*keyState{w}, ""
	}
}

// dequeued is the transition of a Dequeue of owner by call c: its entry ends, and a grant
// that it did not take (a lock held once, or a permit held once) is given back, as by its
// release.
func (m *model) dequeued(owner string, c call) transition {
	return func(w *keyState) ([]*keyState, string) {
		h := w.holds[owner]
		if !w.dequeue(owner) || !(h.w == 1 && h.r == 0 || w.limit > 0 && h.w == 0 && h.r == 1) {
			return []*keyState{w}, ""
		}
		delete(w.holds, owner)
		if w.held() {
			m.grantPermit(w, c)
		} else {
			m.free(w, c)
		}
		return []*keyState{w}, ""
	}
}
