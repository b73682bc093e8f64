package locker

import (
	"context"
	"errors"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// The path of an Unlock, top-down: Unlock ends the lease's context, waits for a hand-off that
// gave the lease to be confirmed (awaitHandOff), then either hands the key to the next Lock call
// of this Client waiting in the key's turn (offerHandOff, handOff, settle) or forgets the lease
// and releases one hold (forget, release), sending the release again while the backend is
// unavailable; the Observer hears of it at the end.

// Unlock releases this hold: the owner's hold count drops by one, and at zero the lock is free
// and waiters are woken. It ends the lease's context first, then takes one round trip (a lost
// reply is sent again with the same request ID, up to 3 times while the backend is unavailable),
// all bounded by WithUnlockTimeout (default 5s); Close does not cut it short. While other Lock
// calls of the same Client wait for the key, it hands the key to the next of them instead, the
// key staying held throughout (see HandOffer). A second Unlock of the Lease, or one whose hold the
// backend no longer had (expired, forced away: mutual exclusion may have been violated), returns
// an error wrapping ErrNotHeld. It works after Close. The details: docs/guarantees.md, item 2.
func (l *Lease) Unlock() error {
	if l == nil {
		return display.Errorf("locker: unlock of a nil Lease: %w", ErrNotHeld)
	}
	if !l.unlocked.CompareAndSwap(false, true) {
		return display.Errorf("locker: unlock %s: already unlocked: %w", display.Key(l.key), ErrNotHeld)
	}
	var began time.Duration
	if l.client.cfg.obs != nil {
		began = sinceEpoch()
	}
	l.end(nil)
	// The release keeps the values of the lease's context (tracing) but not its end: l.values is
	// the parent of l.ctx, without cancellation (context.WithoutCancel, with no allocation), and
	// l.unlocking is WithTimeout of it, in the Lease's allocation.
	l.unlocking.start(&l.values, l.unlockTimeout)
	ctx := context.Context(&l.unlocking)
	l.client.awaitHandOff(ctx, l.hold) // the release must not overtake the hand-off that gave l
	var err error
	if g := l.client.offerHandOff(l); g != nil {
		l.passTurn() // the next local waiter claims g and goes on at once
		err = l.client.handOff(ctx, l, g)
	} else {
		l.client.forget(l)
		err = l.client.release(ctx, l.fullKey, l.owner, l.releaseID, l.shared, l.fresh)
		l.passTurn() // after the release: the next local waiter tries at once
	}
	timedOut := ctx.Err() != nil
	l.unlocking.stop()
	switch {
	case err != nil && timedOut:
		err = display.Errorf("locker: unlock %s: no answer within %v (WithUnlockTimeout); the hold may stay until its lease runs out: %w", display.Key(l.key), l.unlockTimeout, err)
	case err != nil:
		err = display.Errorf("locker: unlock %s: %w", display.Key(l.key), err)
	}
	if obs := l.client.cfg.obs; obs != nil {
		l.observeUnlock(obs, began, err)
	}
	return err
}

// observeUnlock reports l's Unlock, which began at began (sinceEpoch) and returns err. Its ctx
// is the values of l's context, which need no allocation (l.Context may make it).
func (l *Lease) observeUnlock(o *observers, began time.Duration, err error) {
	if o.Unlock != nil {
		now := sinceEpoch()
		o.Unlock(&l.values, UnlockEvent{Lease: l, Held: now - l.granted, Duration: now - began, Lost: l.lost, Err: err})
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

// offerHandOff makes l's Unlock a hand-off when it can be one: l holds its turn and its owner's
// last hold, others wait in the turn, the backend is a HandOffer and nothing asks for a release.
// It then forgets l's hold, offers the gift in the turn and returns it; nil means release. A
// permit is offered in its line (offerPermit).
func (c *Client) offerHandOff(l *Lease) *gift {
	if l.limit > 0 {
		return c.offerPermit(l)
	}
	if l.turn == nil || l.shared {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mayGive(l) {
		return nil
	}
	t := l.turn
	c.turns.mu.Lock()
	defer c.turns.mu.Unlock()
	if t.users < 2 || t.gift != nil || t.yield || t.gifts >= maxHandOffs {
		t.yield, t.gifts = false, 0 // a release: those waiting elsewhere get their chance
		return nil
	}
	g := &gift{from: l.owner, validUntil: l.hold.validUntil, ready: make(chan struct{}), done: make(chan struct{})}
	t.gift = g
	t.gifts++
	c.forgetGiven(l)
	return g
}

// mayGive reports whether l's hold may be handed to another owner: the backend is a HandOffer,
// the Client is open, l is its hold's one lease, and the hold is valid and not itself a hand-off
// that awaits confirmation. Client.mu is held.
func (c *Client) mayGive(l *Lease) bool {
	_, ok := c.backend.(HandOffer)
	h := l.hold
	return ok && !c.closed && len(h.leases) == 1 && h.leases[0] == l && h.gift == nil && time.Now().Before(h.validUntil)
}

// forgetGiven forgets l's hold, which a hand-off gives away. Client.mu is held.
func (c *Client) forgetGiven(l *Lease) {
	h := l.hold
	h.remove(l)
	if c.held[h.id] == h {
		delete(c.held, h.id)
	}
}

// handOff is the rest of an Unlock that offered g (l's context ended, its turn passed): it waits
// for the gift to be claimed and sends the HandOff, or releases l's hold when nobody took it.
func (c *Client) handOff(ctx context.Context, l *Lease, g *gift) error {
	defer close(g.done)
	select {
	case <-g.ready:
	case <-ctx.Done():
		if l.turn != nil && c.withdraw(l.turn, g) {
			return c.release(ctx, l.fullKey, l.owner, l.releaseID, l.shared, l.fresh) // ctx ended: it says so
		}
		<-g.ready // claimed meanwhile (a permit's, at once): the taker is about to close it
	}
	if g.to == "" {
		return c.release(ctx, l.fullKey, l.owner, l.releaseID, l.shared, l.fresh)
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
	c.turns.mu.Lock()
	defer c.turns.mu.Unlock()
	if t.gift == g {
		t.gift = nil
		return true
	}
	return false
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
	others := res.Queued
	if g.turn != nil && g.turn.offer != nil {
		others-- // a line of permits: the call that tries the backend for it may wait in the queue
	}
	if (err != nil || others > 0) && g.turn != nil {
		c.turns.mu.Lock()
		g.turn.yield = true
		c.turns.mu.Unlock()
	}
	if c.held[h.id] == h {
		c.wd.arm(c, h.due(!c.wd.renewing))
	}
}

// forget removes an unlocked lease from its hold; the watchdog stops renewing a hold with no
// lease left.
func (c *Client) forget(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := l.hold
	if !h.remove(l) || len(h.leases) > 0 {
		return
	}
	if c.held[h.id] == h {
		delete(c.held, h.id)
	}
}

// releaseAttempts is how many times Unlock sends a release while the backend is unavailable.
const releaseAttempts = 3

// release removes one hold of owner on full (a shared one when shared), with request ID id (a
// fresh one when ""), sending the request again with the same ID while the backend is
// unavailable; ctx is Unlock's, whose deadline bounds every send and every wait for a reply. A
// driver may send a release again unseen (go-redis after a network error), and only the
// request's marker then tells that the first send released the hold. For a fresh owner (fresh),
// the marker of its last release need only live while a reply may be read:
// ReleaseRequest.ReplyWindow is the time left until ctx's deadline, measured before the first
// send (the server starts the marker's life later).
func (c *Client) release(ctx context.Context, full, owner, id string, shared, fresh bool) error {
	if id == "" {
		id = c.ids.next()
	}
	req := ReleaseRequest{Key: full, Owner: owner, ID: id, Shared: shared}
	if fresh {
		req.Fresh, req.ReplyWindow = true, replyWindow(ctx)
	}
	return c.releaseWhileUnavailable(ctx, req, releaseAttempts, nil)
}

// replyWindow is the time left until ctx's deadline, rounded up to whole milliseconds, at least
// one and at most RequestWindow (as long as any marker: also when ctx has no deadline).
func replyWindow(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return RequestWindow
	}
	left := time.Until(d)
	if r := left % time.Millisecond; r > 0 {
		left += time.Millisecond - r
	}
	return min(max(left, time.Millisecond), RequestWindow)
}

// releaseWhileUnavailable sends req while the backend is unavailable, as whileUnavailable says.
// Sending req again is safe: it carries a request ID, so a copy whose first send took effect
// changes nothing.
func (c *Client) releaseWhileUnavailable(ctx context.Context, req ReleaseRequest, attempts int, stop <-chan struct{}) error {
	return c.whileUnavailable(ctx, attempts, stop, func() error {
		_, err := c.backend.Release(ctx, req)
		return err
	})
}

// whileUnavailable calls send until it returns anything but an error wrapping ErrUnavailable, at
// most attempts times (0: until ctx ends or stop is closed), 50ms apart, then twice as long each
// time up to maxUnavailableWait, and returns the last error. send must be safe to repeat (a
// request with an ID, a hand-off).
func (c *Client) whileUnavailable(ctx context.Context, attempts int, stop <-chan struct{}, send func() error) error {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := send()
		if !errors.Is(err, ErrUnavailable) || attempt == attempts {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-stop:
			t.Stop()
			return err
		}
		wait = min(2*wait, maxUnavailableWait)
	}
}

// maxUnavailableWait is the longest Lock waits before trying again after the backend was
// unavailable, so that it gets the lock soon after the backend is back.
const maxUnavailableWait = 200 * time.Millisecond
