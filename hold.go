package locker

import (
	"slices"
	"time"
)

// holdID names what the backend stores: an owner's holds on a key.
type holdID struct{ key, owner string }

// A hold is the Client's record of one (key, owner) pair it holds leases of: the leases, and
// what the Client knows of the lease on the backend. All fields are guarded by Client.mu.
type hold struct {
	id       holdID
	leases   []*Lease
	first    [2]*Lease     // the backing of leases while it is short: most holds are 1 or 2 deep
	renewing int           // how many of leases want renewal
	renewTTL time.Duration // the TTL renewals send: that of the latest renewed lease
	seq      uint64        // Client.seq at the latest confirmation

	// validUntil is when the backend's lease may have run out, by the local monotonic clock,
	// less a safety margin: the leases' contexts end then unless a renewal moved it.
	validUntil time.Time
	// renewAt is when a third of the current lease has passed; retryAt, after a renewal whose
	// outcome was unknown, when to try again.
	renewAt, retryAt time.Time

	// gift, while not nil, is the local hand-off that gave the hold, not yet confirmed by the
	// backend: the hold is not renewed, and validUntil is the giver's (handoff.go).
	gift *gift
}

func (h *hold) add(l *Lease) {
	if h.leases == nil {
		h.leases = h.first[:0]
	}
	h.leases = append(h.leases, l)
	if l.renew {
		h.renewing++
		h.renewTTL = l.ttl
	}
}

// remove drops l from the hold and reports whether it was there.
func (h *hold) remove(l *Lease) bool {
	for i, x := range h.leases {
		if x == l {
			h.leases = slices.Delete(h.leases, i, i+1)
			if l.renew {
				h.renewing--
			}
			return true
		}
	}
	return false
}

// confirm records that an operation sent at sent set the backend's lease to ttl. seq is the
// hold's seq when the operation started (0 if there was no hold). If another operation was
// confirmed meanwhile, the two raced on the backend and either may have been applied last, so
// the hold keeps the earlier of the two expiries.
func (h *hold) confirm(seq, next uint64, sent time.Time, ttl time.Duration) {
	until, renew := validUntil(sent, ttl), sent.Add(ttl/3)
	if h.seq == seq || h.validUntil.IsZero() {
		h.validUntil, h.renewAt = until, renew
	} else {
		if until.Before(h.validUntil) {
			h.validUntil = until
		}
		if renew.Before(h.renewAt) {
			h.renewAt = renew
		}
	}
	h.seq = next
	h.retryAt = time.Time{}
}

// dropUpTo removes the leases registered at or before seq (Lease.seq) and ends their contexts
// with ErrLockLost, reporting why: the backend showed that the owner's holds were gone after they
// were taken. Leases registered later were granted after that and stay.
func (h *hold) dropUpTo(seq uint64, why LostCause) {
	kept := h.leases[:0]
	for _, l := range h.leases {
		if l.seq > seq {
			kept = append(kept, l)
			continue
		}
		if l.renew {
			h.renewing--
		}
		l.lose(why)
	}
	clear(h.leases[len(kept):])
	h.leases = kept
}

// end ends the context of every lease of the hold with cause.
func (h *hold) end(cause error) {
	for _, l := range h.leases {
		l.end(cause)
	}
}

// renewable reports whether the watchdog should renew the hold at now: it has leases that want
// renewal and a sixth of its lease or less remains before renewAt (so that holds acquired at
// nearby times share one round trip), no failed renewal asks it to wait, and no hand-off that
// gave it awaits confirmation.
func (h *hold) renewable(now time.Time) bool {
	return h.renewing > 0 && h.gift == nil && !now.Before(h.renewAt.Add(-h.renewTTL/6)) && !now.Before(h.retryAt)
}

// due returns when the watchdog must next look at the hold: when it may expire, or, if renewals
// are not paused, when it must be renewed.
func (h *hold) due(renewals bool) time.Time {
	t := h.validUntil
	if renewals && h.renewing > 0 && h.gift == nil {
		r := h.renewAt
		if h.retryAt.After(r) {
			r = h.retryAt
		}
		if r.Before(t) {
			t = r
		}
	}
	return t
}

// validUntil returns until when a lease of ttl set by an operation sent at sent is surely still
// on the backend by the local clock: sent + ttl less a safety margin of 1% + 2ms for clock drift
// between client and server (at most a third of ttl).
func validUntil(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - min(ttl/100+2*time.Millisecond, ttl/3))
}
