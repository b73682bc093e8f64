package locker

import (
	"context"
	"time"
)

// Grants between Clients (see Granter). A Lock that waits in the backend's queue asks for a
// grant: the release that frees the key gives it to the first waiter that asked, and its notice
// tells that waiter so, with the ID of the request that queued it; the notices of grants to
// others do not wake it. The waiter's Lock then returns its Lease at once, without a round trip,
// and an Acquire of the same owner confirms the hold in the background (it resets the lease from
// the grant's to the TTL). As for a local hand-off (handoff.go), until then the hold's validity
// is the least the backend gives it — the grant's lease from the send of the request that queued
// it, which reached the backend before the grant — it is not renewed, and a re-entry or Unlock of
// it waits for the confirmation.

// maxGrantLease bounds the lease of a grant (AcquireRequest.Grant): a waiter that dies or stalls
// before it takes the key a release granted it holds everyone up for at most this long.
const maxGrantLease = 2 * time.Second

// subscribe listens for the release notices of r's key: on a Granter, when r may be granted the
// key, as r's owner (grants are told on grants, and those to others do not wake it); otherwise
// on notices.
func (c *Client) subscribe(ctx context.Context, r *request) (notices <-chan struct{}, grants <-chan string, cancel func(), err error) {
	if g, ok := c.backend.(Granter); ok && r.grant > 0 {
		grants, cancel, err = g.SubscribeAs(ctx, r.full, r.owner)
		return nil, grants, cancel, err
	}
	notices, cancel, err = c.backend.Subscribe(ctx, r.full)
	return notices, nil, cancel, err
}

// takeGrant returns r's Lease when a notice told of a grant to r's owner with request ID id, the
// ID of r's latest attempt (an older one's grant may be gone), and r may take a hold before the
// backend confirms it: a new owner's renewed lease without fencing token, whose grant has at
// least half its lease left. Otherwise it returns nil, and r's next attempt finds out.
func (c *Client) takeGrant(ctx context.Context, r *request, id string) *Lease {
	if id == "" || id != r.id || r.grant <= 0 || !r.mayGoOnUnconfirmed() {
		return nil
	}
	validUntil := r.idSent.Add(r.grant)
	if time.Until(validUntil) < r.grant/2 {
		return nil // the notice came late: confirm before going on
	}
	g := &gift{validUntil: validUntil, done: make(chan struct{}), to: r.owner, ttl: r.cfg.ttl, turn: r.turn}
	l := c.registerPending(ctx, r, g, true)
	if l == nil {
		return nil
	}
	r.queued = false // the confirmation ends the grant's record in the queue
	confirm := AcquireRequest{Key: r.full, Owner: r.owner, TTL: r.cfg.ttl, ID: c.ids.next(), Fresh: true, Reentry: true, Wait: r.wait}
	go c.confirmGrant(g, confirm)
	return l
}

// confirmGrant sends confirm, the Acquire that takes the grant g (a re-entry: it never takes a
// new hold), while the backend is unavailable, within undoTimeout and until Close, and settles
// g's hold with its outcome.
func (c *Client) confirmGrant(g *gift, confirm AcquireRequest) {
	defer c.undos.Done()
	defer close(g.done)
	ctx, cancel := context.WithTimeout(c.ctx, undoTimeout)
	defer cancel()
	var (
		a    Acquisition
		sent time.Time
	)
	err := c.whileUnavailable(ctx, releaseAttempts, nil, func() (err error) {
		sent = time.Now()
		a, err = c.backend.Acquire(ctx, confirm)
		return err
	})
	c.settle(confirm.Key, g, HandOffResult{Holds: a.Holds}, err, sent)
}
