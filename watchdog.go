package locker

import (
	"context"
	"errors"
	"time"
)

// The watchdog's work, when its timer fires (see watchdog): a short-lived goroutine (tick) ends
// the leases whose validity ran out and renews, in one Locker.Renew call, every hold that is due
// or nearly due; then it sets the timer for the next due time. Only one renewal is in flight at
// a time, but expiries are still enforced while it is.

// tick is the watchdog's timer function.
func (c *Client) tick() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wd.ticks.Add(1)
	defer c.wd.ticks.Done()
	c.wd.at = time.Time{}
	now := time.Now()
	var (
		batch    []Renewal
		holds    []*hold
		seqs     []uint64
		deadline time.Time // a renewal is useless once the batch's last lease may have expired
	)
	for id, h := range c.held {
		if !now.Before(h.validUntil) {
			delete(c.held, id)
			h.lose(LostExpired)
			continue
		}
		if !c.wd.renewing && h.renewable(now) {
			batch = append(batch, Renewal{Key: id.key, Owner: id.owner, TTL: h.renewTTL})
			holds = append(holds, h)
			seqs = append(seqs, h.seq)
			if h.validUntil.After(deadline) {
				deadline = h.validUntil
			}
		}
	}
	if len(batch) > 0 {
		c.wd.renewing = true
	}
	c.armNext()
	c.mu.Unlock()

	if len(batch) > 0 {
		c.renew(batch, holds, seqs, deadline)
	}
}

// armNext arms the watchdog for the earliest due time of all holds. Client.mu is held.
func (c *Client) armNext() {
	var next time.Time
	for _, h := range c.held {
		if t := h.due(!c.wd.renewing); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	c.wd.arm(c, next)
}

// renew sends one batch of renewals, bounded by deadline, and applies the outcome to holds
// (same order as batch); seqs are the holds' seq when the batch was made.
func (c *Client) renew(batch []Renewal, holds []*hold, seqs []uint64, deadline time.Time) {
	sent := time.Now()
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	errs := c.backend.Renew(ctx, batch)
	cancel()
	if o := c.cfg.obs; o != nil && o.Renew != nil {
		c.observeRenew(o, batch, errs, time.Since(sent))
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.wd.renewing = false
	if c.closed {
		return
	}
	retry := time.Now()
	for i, h := range holds {
		if c.held[h.id] != h {
			continue // unlocked, lost or replaced meanwhile
		}
		switch err := renewalErr(errs, len(batch), i); {
		case err == nil:
			c.seq++
			h.confirm(seqs[i], c.seq, sent, batch[i].TTL)
		case errors.Is(err, ErrNotHeld):
			c.loseUpTo(h, seqs[i])
		default:
			// Unknown: try again soon; the hold's validity ends its leases if this goes on.
			h.retryAt = retry.Add(h.renewTTL / 10)
		}
	}
	c.armNext()
}

// renewalErr returns the outcome of entry i of a batch of n renewals that returned errs:
// errUnknown when the backend did not report one per entry.
func renewalErr(errs []error, n, i int) error {
	if len(errs) != n {
		return errUnknown
	}
	return errs[i]
}

// errUnknown stands for the outcome of a renewal that the backend did not report.
var errUnknown = errors.New("locker: backend reported no outcome of a renewal")

// loseUpTo drops the leases of h registered at or before seq (see hold.dropUpTo), and forgets h
// when none is left. Client.mu is held.
func (c *Client) loseUpTo(h *hold, seq uint64) {
	h.dropUpTo(seq, LostGone)
	if len(h.leases) == 0 && c.held[h.id] == h {
		delete(c.held, h.id)
	}
}

// observeRenew reports a renewal round trip of batch that took d and returned errs.
func (c *Client) observeRenew(o *observers, batch []Renewal, errs []error, d time.Duration) {
	e := RenewEvent{Holds: len(batch), Duration: d}
	for i := range batch {
		switch err := renewalErr(errs, len(batch), i); {
		case err == nil:
			e.Renewed++
		case errors.Is(err, ErrNotHeld):
			e.Gone++
		default:
			e.Failed++
			if e.Err == nil {
				e.Err = err
			}
		}
	}
	o.Renew(context.Background(), e)
}
