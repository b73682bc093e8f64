package locker

import (
	"context"
	"errors"
	"math"

	"github.com/hashlock/locker/internal/display"
)

// Semaphores. A semaphore of n is a key that at most n leases hold at once, across every Client:
// Acquire takes one of its permits. Each permit is a Lease like a lock's (renewed by the
// watchdog, its context ending with ErrLockLost when it is lost, Unlock giving it back, a
// fencing token of its own with WithFencing), and keeps a lease of its own on the backend: a
// holder that crashes frees its permit when its own lease ends, whatever the other holders do.
// The path of an Acquire is a Lock's (lock.go), with the request's limit; the backend's side is
// Semaphorer.

// Acquire obtains one of the n permits of the semaphore key, waiting as long as it takes: at
// most n leases of key are held at once, across every Client and process. ctx bounds the wait
// only, as for Lock. n is stored with the key by its first permit and kept while any permit is
// held: an Acquire with another n, or a lock call on the key, fails at once with an error
// wrapping ErrLimitMismatch (to change n, see docs/semaphore.md). Through a permit's lease
// context, Acquire re-enters that permit (one permit, held twice: Holds 2). While every permit is
// taken it waits for a release notice, the soonest permit's lease end or the retry strategy's next
// try; with WithFair, calls obtain permits in the order they asked, across Clients. n must be 1 to
// the backend's MaxLimit (ErrInvalid); the backend must be a Semaphorer (all of this module's but
// backend/quorum; else errors.ErrUnsupported). Its errors are Lock's, the refusal a
// *NotObtainedError with Limit and Taken. The guarantees: docs/semaphore.md.
func (c *Client) Acquire(ctx context.Context, key string, n int, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, true, true, permits(n))
}

// TryAcquire makes one attempt to obtain (or re-enter) one of the n permits of the semaphore
// key, as Acquire does, but does not wait: while every permit is taken (or, with WithFair, others
// wait) it returns a *NotObtainedError that reports the permits taken (Taken) and when the
// soonest of their leases ends (TTL).
func (c *Client) TryAcquire(ctx context.Context, key string, n int, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, false, true, permits(n))
}

// permits is the n of an Acquire or TryAcquire as the request's limit: the calls of a semaphore
// are those with a limit other than 0, so an n below 1 (refused by checkLimit) becomes -1.
func permits(n int) int {
	if n < 1 {
		return -1
	}
	return n
}

// checkLimit checks the limit of an Acquire or TryAcquire (not 0) against the backend.
func (c *Client) checkLimit(limit int) error {
	s, ok := c.backend.(Semaphorer)
	switch {
	case !ok:
		return display.Errorf("the backend (%T) has no semaphores (it is no locker.Semaphorer): %w", c.backend, errors.ErrUnsupported)
	case limit < 1:
		return display.Errorf("%w: a semaphore needs 1 to %d permits", ErrInvalid, s.MaxLimit())
	case limit > min(s.MaxLimit(), math.MaxInt32):
		return display.Errorf("%w: a semaphore of %d permits is over the backend's limit of %d", ErrInvalid, limit, min(s.MaxLimit(), math.MaxInt32))
	}
	return nil
}
