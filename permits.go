package locker

import "context"

// Lines of permits. The Acquire calls of one Client on one semaphore key that wait queue in a
// line, as a Lock's calls wait their turn (turn.go): one of them, the token's, tries the backend
// and waits for notices, the others wait on the channel without a round trip; once it has a
// permit it passes the token on, so that the next tries at once (another permit may be free). An
// Unlock of a permit of this Client on the key, while a call of the line is ready for it (waiting,
// not sending), hands the permit to that call instead of releasing it: the call returns its Lease
// at once, and Unlock sends one HandOff (old owner out, new owner in, the permit held on the
// backend throughout), as for a lock's local hand-off. Fair calls queue on the backend instead.

// offerPermit makes the Unlock of l, a permit, a hand-off when it can be one: l is its fresh
// owner's one hold, the backend is a HandOffer, a call of the key's line takes the gift now, and
// the line has not made maxHandOffs in a row (then one Unlock releases, so that others get their
// chance). It then forgets l's hold and returns the gift; nil means release.
func (c *Client) offerPermit(l *Lease) *gift {
	if !l.fresh {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mayGive(l) {
		return nil
	}
	c.turns.mu.Lock()
	defer c.turns.mu.Unlock()
	t := c.turns.m[l.fullKey]
	switch {
	case t == nil || t.offer == nil:
		return nil
	case t.yield || t.gifts >= maxHandOffs:
		t.yield, t.gifts = false, 0 // a release: those waiting elsewhere get their chance
		return nil
	}
	g := &gift{from: l.owner, validUntil: l.hold.validUntil, ready: make(chan struct{}), done: make(chan struct{})}
	select {
	case t.offer <- g: // taken by a call that waits: it claims it (claim) once Client.mu is free
	default:
		return nil // none is ready for it
	}
	t.gifts++
	c.forgetGiven(l)
	return g
}

// inLine is the rest of an Acquire that waits in its Client's line t of the key (refused: its
// first attempt's refusal, or nil when it has not tried): it takes the token, or a permit handed
// to it meanwhile, contends with the token (taking a permit handed to it then too), and passes
// the token on.
func (c *Client) inLine(ctx context.Context, r *request, t *turn, refused *NotObtainedError) (*Lease, error) {
	r.line = t
	g, err := c.takeTurn(ctx, r, t)
	for err == nil && g != nil {
		if l := c.claim(ctx, r, t, g); l != nil {
			c.turns.leave(r.full, t, false)
			return l, nil
		}
		g, err = c.takeTurn(ctx, r, t) // declined (closed): wait for the token after all
	}
	if err != nil {
		c.turns.leave(r.full, t, false)
		return nil, err
	}
	l, err := c.contend(ctx, r, refused)
	c.turns.leave(r.full, t, true)
	return l, err
}

// offers is where r may be handed a permit in its line: its line's offers while r may hold a
// permit before the backend confirms it (mayGoOnUnconfirmed) and no attempt of r's asked for a
// grant; nil otherwise, never ready. (A release by another holder may grant r's owner a permit
// while other permits are held, its own included: a HandOff to an owner that holds a permit
// already is taken as sent again, and the giver's permit would stay behind. The calls of a line
// that never tried the backend, most of them, take the gifts.)
func (r *request) offers() <-chan *gift {
	if r.line == nil || r.askedGrant || !r.mayGoOnUnconfirmed() {
		return nil
	}
	return r.line.offer
}
