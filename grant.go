package locker

import (
	"context"
	"time"
)

// Grants between Clients (see Granter). A Lock that waits in the backend's queue asks for a
// grant: the release that frees the key gives it to the first waiter that asked, and its notice
// tells that waiter so, with the ID of the request that queued it; the notices of grants to
// others do not wake it. The waiter's Lock then returns its Lease at once, without a round trip:
// the hold is the backend's already, with the grant's lease, which counts from the send of the
// request that queued the waiter (it reached the backend before the grant). No call confirms it:
// the watchdog renews it, a third into the grant's lease, to the TTL like any lease, and learns
// then whether it is still there; a release ends the grant's record in the queue. So a hand-off
// between Clients costs the taker no round trip, before it starts or after.

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
// least half its lease left, and no Dequeue of whose owner was sent. Otherwise it returns nil, and
// r's next attempt finds out.
func (c *Client) takeGrant(ctx context.Context, r *request, id string) *Lease {
	if id == "" || id != r.id || r.grant <= 0 || !r.mayGoOnUnconfirmed() {
		return nil
	}
	if r.dequeued {
		// A Dequeue of r's owner, sent in the background while r waited in its Client's local
		// turn (takeTurn), may reach the backend after the grant and give it back: only an
		// Acquire tells (the next attempt: it finds the hold, or not).
		return nil
	}
	if time.Until(r.idSent.Add(r.grant)) < r.grant/2 {
		return nil // the notice came late: the next attempt (it finds the hold) resets the lease first
	}
	l, err := c.register(ctx, r, Acquisition{Holds: 1}, r.idSeq, r.idSent, r.grant)
	if err != nil {
		return nil // closed: the next attempt says so
	}
	r.queued = false // the release ends the grant's record in the queue
	return l
}
