package locker

import (
	"context"
	"errors"
	"time"
)

// Local hand-offs. When a Lease that holds its key's local turn (see turn) is unlocked while
// other Lock calls of the same Client wait in that turn, on a backend that is a HandOffer, Unlock
// hands the key to the next of them instead of releasing it: that call claims the hand-off and
// returns its Lease at once, while Unlock sends one HandOff (old owner out, new owner in), the
// key staying held on the backend throughout. Until the HandOff is confirmed, the new Lease's
// hold keeps the old hold's validity (so its context ends before the old lease may have expired
// on the backend), is not renewed, and a re-entry or Unlock of it waits for the confirmation.
// When the HandOff reports others waiting in the backend's queue (other Clients, readers), the
// turn's next Unlock releases instead, so that they get the chance they get without hand-offs.

// maxHandOffs bounds the hand-offs in a row on one turn, whatever the backend reports.
const maxHandOffs = 64

// A gift is a hand-off offered by an Unlock to the next Lock call in its turn.
type gift struct {
	from       string        // the giver's owner token
	validUntil time.Time     // the giver's validity: the taker's until the HandOff is confirmed
	ready      chan struct{} // closed once claimed (to set), declined or dropped
	done       chan struct{} // closed once the giver's backend call is over

	// Set by the taker before ready is closed.
	to   string        // the taker's owner token; "" when declined or dropped
	ttl  time.Duration // the taker's TTL
	turn *turn         // the turn it was offered in
}

// offerHandOff makes l's Unlock a hand-off when it can be one: l holds its turn and its owner's
// last hold, others wait in the turn, the backend is a HandOffer and nothing asks for a release.
// It then forgets l's hold, offers the gift in the turn and returns it; nil means release.
func (c *Client) offerHandOff(l *Lease) *gift {
	if l.turn == nil || l.shared {
		return nil
	}
	if _, ok := c.backend.(HandOffer); !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := l.hold
	if c.closed || len(h.leases) != 1 || h.leases[0] != l || h.gift != nil || !time.Now().Before(h.validUntil) {
		return nil
	}
	t := l.turn
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	if t.users < 2 || t.gift != nil || t.yield || t.gifts >= maxHandOffs {
		t.yield, t.gifts = false, 0 // a release: those waiting elsewhere get their chance
		return nil
	}
	g := &gift{from: l.owner, validUntil: h.validUntil, ready: make(chan struct{}), done: make(chan struct{})}
	t.gift = g
	t.gifts++
	h.remove(l)
	if c.held[h.id] == h {
		delete(c.held, h.id)
	}
	return g
}

// handOff is the rest of an Unlock that offered g (l's context ended, its turn passed): it waits
// for the gift to be claimed and sends the HandOff, or releases l's hold when nobody took it.
func (c *Client) handOff(ctx context.Context, l *Lease, g *gift) error {
	defer close(g.done)
	select {
	case <-g.ready:
	case <-ctx.Done():
		if c.withdraw(l.turn, g) {
			return c.release(ctx, l.fullKey, l.owner, l.releaseID, false, l.fresh) // ctx ended: it says so
		}
		<-g.ready // claimed meanwhile: the taker is about to close it
	}
	if g.to == "" {
		return c.release(ctx, l.fullKey, l.owner, l.releaseID, false, l.fresh)
	}
	req := HandOffRequest{Key: l.fullKey, From: l.owner, To: g.to, TTL: g.ttl}
	var (
		res  HandOffResult
		sent time.Time
	)
	err := c.whileUnavailable(ctx, releaseAttempts, nil, func() (err error) {
		sent = time.Now()
		res, err = c.backend.(HandOffer).HandOff(ctx, req)
		return err
	})
	c.settle(l.fullKey, g, res, err, sent)
	return err
}

// withdraw takes g back from t if nobody claimed it, and reports whether it did.
func (c *Client) withdraw(t *turn, g *gift) bool {
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	if t.gift == g {
		t.gift = nil
		return true
	}
	return false
}

// claimHandOff takes the gift offered in r's turn, if any: r then holds the key through it, and
// its Lease is returned at once. A call that needs the backend's answer before it returns (a
// fencing token, a fixed lease), or whose earlier acquire's outcome is unknown (which must be
// resolved by sending it again), declines it: the giver releases, and it contends as usual.
func (c *Client) claimHandOff(ctx context.Context, r *request) *Lease {
	t := r.turn
	c.turnMu.Lock()
	g := t.gift
	t.gift = nil
	c.turnMu.Unlock()
	if g == nil {
		return nil
	}
	var l *Lease
	if r.mayGoOnUnconfirmed() {
		l = c.registerPending(ctx, r, g)
	}
	if l == nil {
		close(g.ready) // declined
		select {
		case <-g.done: // released: contend without racing the release
		case <-ctx.Done():
		}
		return nil
	}
	g.to, g.ttl, g.turn = r.owner, r.cfg.ttl, t
	r.queued = false // the HandOff ends r's queue entry
	close(g.ready)
	return l
}

// mayGoOnUnconfirmed reports whether r may hold the key before the backend confirms it (a local
// hand-off, or a grant, which its first renewal confirms): a new owner's renewed lease that needs
// no fencing token, and no earlier acquire of r's whose outcome is unknown (it must be resolved
// by sending it again).
func (r *request) mayGoOnUnconfirmed() bool {
	return r.fresh && !r.reentry && !r.pending && r.cfg.renew && !r.cfg.fence
}

// registerPending records the hold that g gives r's owner, pending until the backend confirms
// its HandOff, and returns its Lease; nil once the Client is closed.
func (c *Client) registerPending(ctx context.Context, r *request, g *gift) *Lease {
	l := c.newLease(ctx, r, Acquisition{Holds: 1}, time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	h := &l.own // a new hold lives in its first lease's allocation
	h.id, h.validUntil, h.renewAt, h.gift = holdID{r.full, r.owner}, g.validUntil, g.validUntil, g
	c.held[h.id] = h
	l.hold = h
	c.seq++
	l.seq, h.seq = c.seq, c.seq
	h.add(l)
	c.wd.arm(c, h.due(!c.wd.renewing))
	return l
}

// settle applies the outcome of the HandOff that gives g to the taker's hold: confirmed, its
// lease counts from the call's send and it is renewed from now on; refused (the giver's hold was
// gone), its leases are lost; unknown, the next renewal tells whether the taker holds the key.
func (c *Client) settle(full string, g *gift, res HandOffResult, err error, sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.held[holdID{full, g.to}]
	if h == nil || h.gift != g {
		return // lost meanwhile, or the Client was closed
	}
	h.gift = nil
	switch {
	case err == nil:
		c.seq++
		h.confirm(h.seq, c.seq, sent, g.ttl)
	case errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotALock) || errors.Is(err, ErrInvalid):
		c.loseUpTo(h, c.seq)
	default:
		h.renewAt = time.Now()
	}
	if (err != nil || res.Queued > 0) && g.turn != nil {
		c.turnMu.Lock()
		g.turn.yield = true
		c.turnMu.Unlock()
	}
	if c.held[h.id] == h {
		c.wd.arm(c, h.due(!c.wd.renewing))
	}
}

// awaitHandOff waits, within ctx, until the HandOff that gave hold h (nil: none) is confirmed or
// failed, if one is pending: a backend call of h's owner sent before could reach the backend
// first.
func (c *Client) awaitHandOff(ctx context.Context, h *hold) {
	if h == nil {
		return
	}
	c.mu.Lock()
	g := h.gift
	c.mu.Unlock()
	if g != nil {
		select {
		case <-g.done:
		case <-ctx.Done():
		}
	}
}

// holdOf returns this Client's hold of (full, owner), nil when it has none.
func (c *Client) holdOf(full, owner string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[holdID{full, owner}]
}
