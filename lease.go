package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// A Lease is one hold on a lock, returned by Lock and TryLock. Release it exactly once with
// Unlock, typically with defer. A Lease is safe for concurrent use; its methods are nil-safe.
type Lease struct {
	client        *Client
	hold          *hold  // the Client's record of (key, owner), shared by every lease of that pair
	key           string // as the caller passed it
	fullKey       string // prefix + key, as the backend sees it
	owner         string
	holds         int
	token         uint64 // the fencing token, when the Client fences
	ttl           time.Duration
	unlockTimeout time.Duration // bounds Unlock (WithUnlockTimeout)
	renew         bool
	shared        bool   // a shared hold (RLock)
	fresh         bool   // owner is a fresh token of this Client's (ReleaseRequest.Fresh)
	releaseID     string // the request ID of the release of this lease (made with the acquire's)
	outer         *Lease // the lease whose context this one's was derived from, if any
	seq           uint64 // Client.seq when it was registered: orders it against the hold's operations
	turn          *turn  // the local turn this lease holds, passed on by Unlock or loss; nil if none

	own    hold        // the hold, when this lease was its first: one allocation for both
	values leaseValues // the parent of ctx

	// The lease's context is made at the first call of Context (most leases are unlocked
	// without one: two allocations saved); end records its cause until then. ctxMu guards them.
	ctxMu    sync.Mutex
	ctx      context.Context         // nil until Context is called
	cancel   context.CancelCauseFunc // ends ctx's parent: nil with ctx
	stop     context.CancelFunc      // ends the deadline of a fixed lease; nil when renewed
	ended    bool                    // end was called
	cause    error                   // the cause of the first end
	endedAt  time.Time               // when a fixed lease ended, to tell whether its deadline came first
	deadline time.Time               // a fixed lease's: its context's deadline; zero when renewed

	unlocking unlockCtx // the context of Unlock's calls
	unlocked  atomic.Bool
	passed    atomic.Bool // the turn was handed on

	// For the Client's Observer: when the lease was granted (sinceEpoch; 0 without an
	// Observer), and whether lose reported it lost (guarded by Client.mu).
	granted time.Duration
	lost    bool
}

// Key returns the key as it was passed to Lock, without the key prefix.
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Holds returns the owner's hold count right after this acquisition: 1 for a new lock, 2, 3…
// when this Lease re-entered a lock its owner already held. It does not change afterwards.
func (l *Lease) Holds() int {
	if l == nil {
		return 0
	}
	return l.holds
}

// Shared reports whether the lease is a shared hold (RLock, TryRLock) rather than an exclusive
// one (Lock, TryLock).
func (l *Lease) Shared() bool {
	return l != nil && l.shared
}

// Token returns the lock's fencing token when the lease was obtained with WithFencing, and 0
// otherwise. Tokens of a key strictly increase with every new lock on it by any owner (through
// any Client that fences); a re-entry returns the token of the hold it re-entered. Pass it with
// every write made under the lock, and have the storage refuse a write whose token is lower than
// the highest it has seen: a holder that lost the lock without noticing (a process pause longer
// than the TTL) is then rejected. See docs/safety.md.
func (l *Lease) Token() uint64 {
	if l == nil {
		return 0
	}
	return l.token
}

// Context returns the lease's context: do the work under the lock with it, and stop when it
// ends. It carries the values of the ctx passed to Lock (trace data, say) and the ownership of
// this lock: Lock or TryLock on this key with this context, or one derived from it, re-enters
// the lock instead of waiting for it.
//
// It does not inherit the deadline or the cancellation of Lock's ctx, which bound the wait only.
// It ends when this Lease is unlocked (cause context.Canceled), when the hold is lost or may
// have been (cause ErrLockLost: the watchdog found it gone, or renewals failed until the lease
// may have expired on the backend by the local clock, with a safety margin; for a fixed lease,
// just before it expires, which is also its Deadline), or when the Client is closed (cause
// ErrClosed). Read the cause with context.Cause. To stop the work also when a request's ctx
// ends, derive a context from this one and cancel it with context.AfterFunc(requestCtx, cancel).
//
// On a nil Lease it returns a context that has already ended, with cause ErrNotHeld.
func (l *Lease) Context() context.Context {
	if l == nil {
		return notHeldContext
	}
	l.ctxMu.Lock()
	defer l.ctxMu.Unlock()
	if l.ctx == nil {
		l.makeContext()
	}
	return l.ctx
}

// makeContext makes the lease's context, as it would be had it been made with the lease: ended
// already when end was called (with end's cause, or with ErrLockLost past a fixed lease's
// deadline when that came first). l.ctxMu is held.
func (l *Lease) makeContext() {
	ctx, cancel := context.WithCancelCause(&l.values)
	if l.ended && (l.renew || l.endedAt.Before(l.deadline)) {
		cancel(l.cause) // before the deadline's context, which inherits it
	}
	l.ctx, l.cancel = ctx, cancel
	if !l.renew {
		l.ctx, l.stop = context.WithDeadlineCause(ctx, l.deadline, ErrLockLost)
	}
	if l.ended {
		l.cancel(l.cause)
		if l.stop != nil {
			l.stop()
		}
	}
}

// Owner returns the lease's owner token. Keep it secret: whoever has it can re-enter and release
// the lock. It is what another process needs to re-enter this hold with WithHeldOwner (as a
// nested "locker run" does); log String instead, which shows only a prefix of it.
func (l *Lease) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// String describes the lease for logs without its secret: the key (cut after 64 bytes), the
// owner as State.Owner shows it (its label and the first 8 characters of its random part), and
// the hold count.
func (l *Lease) String() string {
	if l == nil {
		return "locker.Lease(nil)"
	}
	kind := ""
	if l.shared {
		kind = "shared, "
	}
	return fmt.Sprintf("locker.Lease(key %s, %sowner %s, holds %d)", display.Key(l.key), kind, display.Owner(l.owner), l.holds)
}

// leaseValues is the parent of a lease's context: the values of the ctx given to Lock, and the
// lease's ownership, without that ctx's deadline or cancellation (as context.WithoutCancel,
// with the ownership value in the same allocation as the Lease).
type leaseValues struct {
	parent context.Context
	lease  *Lease
}

func (*leaseValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*leaseValues) Done() <-chan struct{}       { return nil }
func (*leaseValues) Err() error                  { return nil }
func (v *leaseValues) String() string            { return "locker.Lease.Context" }

func (v *leaseValues) Value(key any) any {
	switch key {
	case ownershipKey{}:
		return v.lease
	case cancelCtxKey:
		return nil // as context.WithoutCancel: the parent's cancellation is not ours
	}
	return v.parent.Value(key)
}

// cancelCtxKey is the private key under which package context finds the nearest context made by
// WithCancel or WithCancelCause in a chain of contexts (for context.Cause, and to propagate
// cancellation). A context made from the lease's values must not find one of the parent's there:
// context.Cause of Unlock's context (unlockCtx) would return the cause with which Lock's ctx
// ended. The key is caught by asking context.Cause about a context that records it.
var cancelCtxKey = func() any {
	var p keyProbe
	_ = context.Cause(&p)
	return p.key
}()

// keyProbe is a context that has ended, and records the key its Value was last asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Err() error        { return context.Canceled }
func (p *keyProbe) Value(key any) any { p.key = key; return nil }

var notHeldContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

// Unlock releases this hold: the owner's hold count drops by one, and at zero the lock is free
// and waiters are woken. It ends the lease's context first, so work derived from it stops before
// another owner can get the lock. It takes one round trip; all of it is bounded by
// WithUnlockTimeout (default 5s), whatever the driver does. Close does not cut it short.
//
// When other Lock calls of the same Client wait for the key (and nobody waits elsewhere), the
// last hold's Unlock hands the key to the next of them instead, on a backend that implements
// HandOffer (every one of this module but the quorum): that call returns its Lease at once,
// while Unlock's round trip passes the hold from the one owner to the other, the key staying
// held throughout (see locker.HandOffer). A Lease obtained so is renewed, and re-entered or
// unlocked, once that round trip is confirmed; should it fail, the Lease is lost (its context
// ends with ErrLockLost) within the old lease's validity.
//
// A release whose reply was lost is sent again with the same request ID, so that it never
// removes two holds: up to 3 attempts, 50ms and 100ms apart, while the backend is unavailable.
//
// A second Unlock of the same Lease returns an error wrapping ErrNotHeld without contacting the
// backend. When the backend no longer had the hold (it expired or was forced away), Unlock
// returns an error wrapping ErrNotHeld too: mutual exclusion may have been violated. Unlock
// works after the Client was closed, as long as the backend still works.
func (l *Lease) Unlock() error {
	if l == nil {
		return display.Errorf("locker: unlock of a nil Lease: %w", ErrNotHeld)
	}
	if !l.unlocked.CompareAndSwap(false, true) {
		return display.Errorf("locker: unlock %s: already unlocked: %w", display.Key(l.key), ErrNotHeld)
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
		l.observeUnlock(obs, err)
	}
	return err
}

// end ends the lease's context with cause (nil: context.Canceled, for Unlock). A lost or closed
// lease passes its turn on, since no Unlock may ever come.
func (l *Lease) end(cause error) {
	l.ctxMu.Lock()
	if !l.ended {
		l.ended, l.cause = true, cause
		if !l.renew {
			l.endedAt = time.Now()
		}
	}
	if l.cancel != nil {
		l.cancel(cause)
		if l.stop != nil {
			l.stop()
		}
	}
	l.ctxMu.Unlock()
	if cause != nil {
		l.passTurn()
	}
}

// passTurn hands the lease's local turn to the next waiting Lock, once.
func (l *Lease) passTurn() {
	if l.turn != nil && l.passed.CompareAndSwap(false, true) {
		l.client.leaveTurn(l.fullKey, l.turn, true)
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
