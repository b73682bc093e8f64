package locker

import (
	"context"
	"fmt"
	"slices"
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
	shared        bool   // a shared hold (RLock), or a semaphore's permit
	fresh         bool   // owner is a fresh token of this Client's (ReleaseRequest.Fresh)
	limit         int32  // a semaphore's permits (Acquire); 0 for a lock (beside the bools: a Lease stays within 568 bytes, one size class with its malloc header)
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
// one (Lock, TryLock) or a semaphore's permit (Acquire, TryAcquire).
func (l *Lease) Shared() bool {
	return l != nil && l.shared && l.limit == 0
}

// Limit returns, for a semaphore's permit (Acquire, TryAcquire), the semaphore's number of
// permits; 0 for a lock.
func (l *Lease) Limit() int {
	if l == nil {
		return 0
	}
	return int(l.limit)
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
// ends. It carries the values of Lock's ctx (trace data) and the ownership of this lock: Lock on
// this key with it, or with a context derived from it, re-enters. It does not inherit the
// deadline or cancellation of Lock's ctx. It ends, with a cause for context.Cause, at Unlock
// (context.Canceled), when the hold is lost or may have been (ErrLockLost: found gone, renewals
// failed until the lease may have expired by the local clock, or a fixed lease's end, which is
// also its Deadline), or at Close (ErrClosed). To stop the work when a request's ctx ends too,
// cancel a derived context with context.AfterFunc(requestCtx, cancel). On a nil Lease it
// returns a context that has ended, with cause ErrNotHeld. Details: docs/guarantees.md, item 3.
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
	switch {
	case l.limit > 0:
		kind = fmt.Sprintf("permit of %d, ", l.limit)
	case l.shared:
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
		l.client.turns.leave(l.fullKey, l.turn, true)
	}
}

// lose reports the loss of the lease (once) to the Observer, then ends its context with
// ErrLockLost: whoever wakes at its end finds the loss reported. Client.mu is held.
func (l *Lease) lose(why LostCause) {
	if !l.lost {
		l.lost = true
		if o := l.client.cfg.obs; o != nil && o.Lost != nil {
			o.Lost(&l.values, LostEvent{Lease: l, Cause: why, Held: sinceEpoch() - l.granted})
		}
	}
	l.end(ErrLockLost)
}

// ownershipKey is the context key under which a Lease's context carries its ownership.
type ownershipKey struct{}

// carrierOf returns the innermost lease whose context ctx is or derives from that holds key (the
// full key, prefix included), or nil. Every lease context adds one link to the chain of its
// parent context, so a context derived from several leases carries the ownership of all of them.
func carrierOf(ctx context.Context, key string) *Lease {
	l, _ := ctx.Value(ownershipKey{}).(*Lease)
	for ; l != nil; l = l.outer {
		if l.fullKey == key {
			return l
		}
	}
	return nil
}

// outerLease returns the innermost lease that ctx carries, or nil.
func outerLease(ctx context.Context) *Lease {
	l, _ := ctx.Value(ownershipKey{}).(*Lease)
	return l
}

// unlockCtx is the context of an Unlock's backend calls: the values of the lease's context
// (tracing), without its end, ending at the deadline that WithUnlockTimeout sets, or when Unlock
// is done (context.Canceled). It is context.WithTimeout(&l.values, timeout) in the Lease's own
// allocation: its Done channel and timer are made only when a call asks for Done (a driver that
// watches ctx, or rediscore.Interruptible), three allocations instead of five.
type unlockCtx struct {
	values   *leaseValues
	deadline time.Time

	mu     sync.Mutex
	done   chan struct{} // made by the first call of Done
	closed bool          // done is closed
	timer  *time.Timer   // closes done at the deadline; made with done
	err    error         // nil until it ends: context.DeadlineExceeded or context.Canceled
}

// start sets the deadline timeout from now.
func (u *unlockCtx) start(values *leaseValues, timeout time.Duration) {
	u.values, u.deadline = values, time.Now().Add(timeout)
}

func (u *unlockCtx) Deadline() (time.Time, bool) { return u.deadline, true }

func (u *unlockCtx) Done() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done == nil {
		u.done = make(chan struct{})
		if u.err == nil && !time.Now().Before(u.deadline) {
			u.err = context.DeadlineExceeded
		}
		if u.err != nil {
			u.closed = true
			close(u.done)
		} else {
			u.timer = time.AfterFunc(time.Until(u.deadline), u.expire)
		}
	}
	return u.done
}

// Err returns nil until the context ends; it ends at the deadline whether or not Done was asked
// for, and Done is closed (once made) before Err returns an error.
func (u *unlockCtx) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil && !time.Now().Before(u.deadline) {
		u.end(context.DeadlineExceeded)
	}
	return u.err
}

func (u *unlockCtx) Value(key any) any { return u.values.Value(key) }

func (u *unlockCtx) String() string { return "locker.Lease.Unlock" }

// expire ends the context at its deadline (the timer's).
func (u *unlockCtx) expire() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.end(context.DeadlineExceeded)
}

// stop ends the context with context.Canceled, if it has not ended, when Unlock is done (as
// WithTimeout's cancel does), so that a driver's call still under way gives up.
func (u *unlockCtx) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.end(context.Canceled)
}

// end ends the context with err, unless it has ended. u.mu is held.
func (u *unlockCtx) end(err error) {
	if u.err == nil {
		u.err = err
	}
	if u.done != nil && !u.closed {
		u.closed = true
		close(u.done)
	}
	if u.timer != nil {
		u.timer.Stop()
	}
}

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
	// backend: the hold is not renewed, and validUntil is the giver's (see gift).
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

// lose ends every lease of the hold with ErrLockLost, reporting why.
func (h *hold) lose(why LostCause) {
	for _, l := range h.leases {
		l.lose(why)
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
