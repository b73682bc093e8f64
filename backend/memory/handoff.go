package memory

import (
	"context"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var _ locker.HandOffer = (*Backend)(nil)

// HandOff implements [locker.HandOffer]: it passes req.Key from req.From, which must hold it
// exclusively with exactly one hold, or hold one permit of it once, to req.To in one step, as
// [locker.HandOffRequest] says.
func (b *Backend) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	if err := ctx.Err(); err != nil {
		return locker.HandOffResult{}, err
	}
	ttl, err := roundTTL("hand off", req.Key, req.TTL)
	if err != nil {
		return locker.HandOffResult{}, err
	}
	if req.Key == "" || req.From == "" || req.To == "" || req.From == req.To {
		return locker.HandOffResult{}, display.Errorf("memory: hand off: an empty key or owner, or From equal to To: %w", locker.ErrInvalid)
	}
	fence := locker.AcquireRequest{Key: req.Key, Owner: req.To, Fence: req.Fence}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	e := b.live(req.Key, now)
	switch {
	case e.heldBy(req.To): // the hand-off, sent again
		e.setLease(req.To, now.Add(ttl))
		return locker.HandOffResult{Holds: e.total(req.To), Token: b.token(fence, e), Queued: b.others(req.Key, req.To, now)}, nil
	case e != nil && e.limit > 0 && e.shared[req.From].holds == 1:
		delete(e.shared, req.From)
		fence.Limit = e.limit
		b.addPermit(e, fence)
		e.setLease(req.To, now.Add(ttl))
		b.remove(req.Key, req.To, now)
		return locker.HandOffResult{Holds: 1, Token: b.token(fence, e), Queued: b.queued(req.Key, now)}, nil
	case e == nil || e.owner != req.From || e.holds != 1 || e.shared[req.From].holds > 0:
		return locker.HandOffResult{}, display.Errorf("memory: hand off: the owner does not hold it exclusively, once: %w", locker.ErrNotHeld)
	}
	e.owner, e.expires = req.To, now.Add(ttl)
	b.advanceFence(fence)
	b.remove(req.Key, req.To, now)
	return locker.HandOffResult{Holds: 1, Token: b.token(fence, e), Queued: b.queued(req.Key, now)}, nil
}

// others counts the live entries of key's queue of owners other than owner.
func (b *Backend) others(key, owner string, now time.Time) int {
	n := 0
	if q := b.liveQueue(key, now); q != nil {
		for _, w := range q.entries {
			if w.owner != owner {
				n++
			}
		}
	}
	return n
}
