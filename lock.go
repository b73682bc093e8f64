package locker

import (
	"context"
	"errors"
	"time"

	"github.com/hashlock/locker/internal/display"
	"github.com/hashlock/locker/internal/fault"
)

// The path of a Lock, top-down: Lock → obtainObserved (the Observer, at the edge) → obtain,
// which validates (check), re-enters through the lease's context or takes a fresh owner, joins
// the key's local turn while other calls of this Client wait or hold (takeTurn, claimHandOff),
// then attempts one Acquire (attempt) and, refused, waits for a notice, a grant or a timer and
// tries again (contend); a granted hold becomes a Lease (register) that the watchdog renews. A
// call that gives up takes back what it may have left on the backend (leave).

// Lock obtains the lock on key, waiting as long as it takes. ctx bounds the wait and the calls
// Lock makes, not the lease: the Lease's context keeps ctx's values only. With a ctx that carries
// the ownership of key (a Lease's context), Lock re-enters: one more hold, the lease reset, no
// wait, and never a new lock (a hold that is gone gives ErrLockLost). Otherwise, while another
// owner holds the key, it waits for a release notice or the retry strategy's next try (default
// ExponentialBackoff(16ms, 1s)), and tries again.
//
// Its errors wrap ErrNotObtained (a *NotObtainedError: the strategy gave up, or ctx ended, and
// then ctx's error too), ErrUnavailable (the backend could not be reached for
// WithUnavailableTimeout, default 5s: never reported as ErrNotObtained), ErrInvalid, ErrClosed,
// ErrNotALock, or the backend's error. An acquire whose outcome is unknown is taken back in the
// background. The details: docs/guarantees.md, items 1, 5 and 6.
func (c *Client) Lock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, true, false, 0)
}

// TryLock makes one attempt to obtain (or re-enter) the lock on key, as Lock does, but does not
// wait: when another owner holds the lock it returns a *NotObtainedError, which wraps
// ErrNotObtained and reports the holder's remaining lease. When the backend fails, TryLock
// returns its error at once (and takes back the acquire, as Lock does).
func (c *Client) TryLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, false, false, 0)
}

// RLock obtains a shared (read) hold on key, waiting as long as it takes, as Lock does: any
// number of owners hold a key shared at once, while an exclusive hold (Lock) excludes them all.
// Readers and writers take turns as with sync.RWMutex, across processes, so neither starves.
// Through a lease's context, RLock re-enters a shared hold, or adds one to the owner's
// exclusive hold (a downgrade: after the writer's Unlock the owner still reads); Lock through an
// RLock lease's context fails at once with an error wrapping ErrUpgrade. It needs a backend that
// implements KindLocker (all of this module's but backend/quorum); on another it returns an
// error wrapping errors.ErrUnsupported. The details: docs/guarantees.md, items 8 to 12.
func (c *Client) RLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, true, true, 0)
}

// TryRLock makes one attempt to obtain (or re-enter) a shared hold on key, as RLock does, but
// does not wait: while a writer holds or waits for the key it returns a *NotObtainedError.
func (c *Client) TryRLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, false, true, 0)
}

// obtainObserved is obtain, reported to the Client's Observer when it has one.
func (c *Client) obtainObserved(ctx context.Context, key string, opts []Option, wait, shared bool, limit int) (*Lease, error) {
	o := c.cfg.obs
	if o == nil || (o.Lock == nil && o.Start == nil) {
		return c.obtain(ctx, key, opts, wait, shared, limit)
	}
	start := time.Now()
	callCtx, lockCtx := o.started(ctx, StartEvent{Key: key, Shared: shared && limit == 0, Try: !wait, Limit: limit})
	l, err := c.obtain(callCtx, key, opts, wait, shared, limit)
	if o.Lock == nil {
		return l, err
	}
	e := LockEvent{Key: key, Shared: shared && limit == 0, Try: !wait, Limit: limit, Wait: time.Since(start), Lease: l, Err: err}
	switch {
	case err == nil && l.holds > 1:
		e.Outcome = Reentered
	case err == nil:
		e.Outcome = Acquired
	case errors.Is(err, ErrLockLost):
		e.Outcome = Failed // a re-entry into a lost hold (through a lease's ended context too)
	case errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		e.Outcome = Canceled
	case refusedOnly(err):
		e.Outcome = NotObtained
	default:
		e.Outcome = Failed
	}
	o.Lock(lockCtx, e)
	return l, err
}

// request is one Lock or TryLock call, resolved.
type request struct {
	key, full, owner string
	cfg              config
	fresh            bool          // owner is a new random token (not re-entry, not WithOwner)
	reentry          bool          // only re-enter the owner's hold (carried by ctx, or WithHeldOwner)
	shared           bool          // a shared hold (RLock), or a semaphore's permit
	limit            int           // a semaphore's permits (Acquire); 0 for a lock
	wait             time.Duration // AcquireRequest.Wait: the queue entry a refusal leaves
	downSince        time.Time     // the first failure of a run of attempts that found the backend unavailable
	downErr          error         // the latest of those failures; nil while the backend answers
	grant            time.Duration // AcquireRequest.Grant: a release may grant it the key (Granter)
	queued           bool          // a refusal may have left an entry in the key's queue
	askedGrant       bool          // an attempt asked for a grant: a release may give r's owner a permit, so it takes no gift (permits.go)
	dequeued         bool          // a Dequeue of its owner was sent: it may give back a later grant
	turn             *turn         // the local turn this call holds, handed to its Lease
	line             *turn         // the local line of an Acquire's permits it waits in (permits.go)
	retry            backoffs      // its own run through cfg.retry: the retries spent, the next one's time

	// The current acquire request: its ID, when it was first sent, the hold's seq then (see
	// opStart), and whether its outcome is unknown (sent, but no answer came back).
	// firstID is the ID of the first acquire, until it is sent; releaseID that of the release
	// of the lease (made with them, in one allocation: see idSource.start).
	firstID   string
	releaseID string
	id        string
	idSent    time.Time
	idSeq     uint64
	pending   bool
}

// obtain is Lock (wait == true) and TryLock; with shared, RLock and TryRLock; with limit > 0 (and
// shared), Acquire and TryAcquire of a permit of a semaphore of limit.
//
// Lock calls of one Client with fresh owners on one key queue locally (see turn): while any of
// them waits or holds the lock through this Client, the others wait for their turn without a
// round trip, so a releaser that locks again at once cannot overtake them, and only one of them
// polls or listens on the backend.
func (c *Client) obtain(ctx context.Context, key string, opts []Option, wait, shared bool, limit int) (_ *Lease, err error) {
	cfg := c.cfg
	if len(opts) > 0 {
		cfg = cfg.apply(opts)
	}
	full, err := c.check(ctx, key, cfg)
	_, kinds := c.backend.(KindLocker)
	switch {
	case err != nil:
	case limit != 0:
		err = c.checkLimit(limit)
	case (shared || cfg.fair) && !kinds:
		err = display.Errorf("the backend (%T) has no shared holds or wait queues (it is no locker.KindLocker): %w", c.backend, errors.ErrUnsupported)
	}
	if err != nil {
		return nil, display.Errorf("locker: %s %s: %w", opName(limit), display.Key(key), err)
	}
	// Every backend call below is bounded by ctx and by Close; the Lease keeps ctx's values.
	callerCtx := ctx
	ctx, id, cancel := c.calls.begin(ctx)
	defer func() {
		c.calls.end(id, cancel)
		if err != nil && !errors.Is(err, ErrClosed) && callerCtx.Err() == nil && c.ctx.Err() != nil {
			err = display.Errorf("locker: %s %s: %w", opName(limit), display.Key(key), ErrClosed)
		}
	}()
	r := &request{key: key, full: full, owner: cfg.owner, reentry: cfg.heldOwner, cfg: cfg, shared: shared, limit: limit}
	if r.owner == "" {
		if carrier := carrierOf(ctx, full); carrier != nil {
			if errors.Is(context.Cause(carrier.Context()), ErrLockLost) {
				return nil, lostReentry(key, limit) // the Client saw the hold go
			}
			r.owner, r.reentry = carrier.owner, true
			carrier.client.awaitHandOff(ctx, carrier.hold) // the re-entry must not overtake it (its Client guards the hold)
		}
	} else if r.reentry {
		c.awaitHandOff(ctx, c.holdOf(full, r.owner)) // WithHeldOwner
	}
	// The owner token (of a fresh owner), the first acquire's ID and the release's, at once.
	var owner string
	r.fresh = r.owner == ""
	owner, r.firstID, r.releaseID = c.ids.start(cfg.label, r.fresh)
	if r.fresh {
		r.owner = owner
	}
	_, mayRetry := cfg.retry.Backoff(0)
	if wait && mayRetry && kinds && !r.reentry {
		r.wait = cfg.ttl // a refusal queues it on the backend, for as long as a lease
	}
	if _, granter := c.backend.(Granter); granter && r.wait > 0 && r.fresh && (!shared || limit > 0) {
		r.grant = min(cfg.ttl, maxGrantLease) // a release may hand the key, or a permit, to it
	}
	// A Lock that never retries behaves as TryLock; readers and fair calls queue on the backend.
	// An Acquire waits in its Client's line of the key (permits.go) as a Lock waits its turn.
	queue := wait && r.fresh && mayRetry && !shared && !cfg.fair
	line := wait && r.fresh && mayRetry && limit > 0 && !cfg.fair
	defer func() {
		if err != nil {
			c.leave(r)
		}
	}()

	var t *turn
	if queue || line {
		t = c.turns.queued(full)
	}
	var refused *NotObtainedError
	if t == nil {
		l, ref, err := c.attempt(ctx, r)
		if wait && mayRetry && errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			ref, err = r.refusal(Acquisition{}, nil), c.down(ctx, r, err) // wait and try again
		}
		if l != nil || err != nil {
			return l, err
		}
		if !wait {
			return nil, ref
		}
		refused = ref
		if queue || line {
			t = c.turns.join(full, line)
		}
	}
	switch {
	case t == nil:
		return c.contend(ctx, r, refused)
	case line:
		return c.inLine(ctx, r, t, refused)
	}
	if _, err := c.takeTurn(ctx, r, t); err != nil {
		c.turns.leave(full, t, false)
		return nil, err
	}
	r.turn = t
	if l := c.claimHandOff(ctx, r); l != nil {
		return l, nil
	}
	l, err := c.contend(ctx, r, refused)
	if err != nil {
		c.turns.leave(full, t, true)
	}
	return l, err
}

// takeTurn waits for the token. Waiting counts against the retry strategy as waiting for the
// lock would (the call in front tries for the key): its backoffs run while it waits, each that
// ends without the token is a retry, and when the strategy gives up, so does the call. The token
// does not start a new backoff: contend goes on with the one under way (see backoffs). A call
// that must wait takes the backend queue entry that its refusal left out first (in the
// background): a release would grant it the key (Granter) while it does not listen. (An acquire
// whose outcome is unknown is left alone: its Dequeue could come first; the call sends it again
// when its turn comes.) In a line of permits (permits.go), it takes a permit handed to it
// instead, when one comes first: it returns the gift then, without the token.
func (c *Client) takeTurn(ctx context.Context, r *request, t *turn) (*gift, error) {
	select {
	case <-t.token:
		return nil, nil
	default:
	}
	if r.grant > 0 && !r.pending {
		c.dequeue(r)
	}
	var w waiter
	defer w.stop()
	for {
		due, ok := r.retry.next(r.cfg.retry)
		if !ok {
			return nil, r.refusal(Acquisition{}, nil)
		}
		woke, err := w.wait(ctx, time.Until(due), t.token, nil, r.offers())
		if err != nil {
			return nil, r.refusal(Acquisition{}, err) // obtain says ErrClosed at Close
		}
		r.retry.woke()
		if woke.gift != nil || woke.woken {
			return woke.gift, nil
		}
	}
}

// claimHandOff takes the gift offered in r's turn, if any: r then holds the key through it, and
// its Lease is returned at once. A call that needs the backend's answer before it returns (a
// fencing token, a fixed lease), or whose earlier acquire's outcome is unknown (which must be
// resolved by sending it again), declines it: the giver releases, and it contends as usual.
func (c *Client) claimHandOff(ctx context.Context, r *request) *Lease {
	t := r.turn
	c.turns.mu.Lock()
	g := t.gift
	t.gift = nil
	c.turns.mu.Unlock()
	if g == nil {
		return nil
	}
	return c.claim(ctx, r, t, g)
}

// claim takes g, a gift offered in turn t, for r, as claimHandOff says; nil when declined.
func (c *Client) claim(ctx context.Context, r *request, t *turn, g *gift) *Lease {
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

// attempt makes one Acquire: it returns the Lease when granted, or the refusal. An acquire whose
// outcome is unknown is sent again with the same ID (within half the RequestWindow), so that it
// takes effect once; its lease counts from the first send. A re-entry is never refused: the
// owner's hold being gone, it fails with ErrLockLost.
func (c *Client) attempt(ctx context.Context, r *request) (*Lease, *NotObtainedError, error) {
	if r.pending && time.Since(r.idSent) > RequestWindow/2 {
		c.leave(r) // the old owner's entry goes too: a grant to it would never be taken
		if r.fresh {
			r.owner = newOwnerToken(r.cfg.label) // the take-back removes every hold of the old one
		}
	}
	if !r.pending {
		r.id, r.firstID, r.idSent = r.firstID, "", time.Now()
		if r.id == "" {
			r.id = c.ids.next()
		}
		if !r.fresh {
			r.idSeq = c.opStart(r.full, r.owner)
		}
	}
	res, err := c.backend.Acquire(ctx, AcquireRequest{
		Key: r.full, Owner: r.owner, TTL: r.cfg.ttl, ID: r.id, Fence: r.cfg.fence, Fresh: r.fresh,
		Reentry: r.reentry, Shared: r.shared, Fair: r.cfg.fair, Wait: r.wait, Grant: r.grant, Limit: r.limit,
	})
	r.askedGrant = r.askedGrant || r.grant > 0
	if err != nil {
		// These errors say that nothing was done; any other leaves the outcome unknown.
		r.pending = !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrNotALock) &&
			!errors.Is(err, ErrUpgrade) && !errors.Is(err, ErrLimitMismatch)
		r.queued = r.queued || (r.wait > 0 && r.pending)
		switch {
		case r.reentry && errors.Is(err, ErrNotHeld):
			return nil, nil, c.loseReentry(r)
		case !errors.Is(err, ErrUnavailable):
			if ended := fault.CtxEnded(ctx); ended != nil {
				return nil, nil, r.refusal(Acquisition{}, ended)
			}
		}
		return nil, nil, display.Errorf("locker: %s %s: %w", opName(r.limit), display.Key(r.key), err)
	}
	r.pending = false
	r.queued = r.queued || r.wait > 0
	if res.Holds > 0 && !r.reentry {
		r.queued = false // a new hold takes its owner out of the queue
	}
	if res.Holds == 0 {
		if r.reentry {
			return nil, nil, c.loseReentry(r) // another owner holds the key: ours is gone
		}
		return nil, r.refusal(res, nil), nil
	}
	l, err := c.register(ctx, r, res, r.idSeq, r.idSent, r.cfg.ttl)
	return l, nil, err
}

// contend tries until the lock is granted, the retry strategy gives up, ctx ends or the Client
// closes. refused is the refusal of an attempt just made (nil: start with an attempt). Between
// attempts it waits for a release notice, or for the soonest of the holder's remaining lease and
// the end of the strategy's backoff under way (r.retry): only that end spends a retry, so a
// notice that brings a refused attempt leaves the call's budget as it was.
func (c *Client) contend(ctx context.Context, r *request, refused *NotObtainedError) (*Lease, error) {
	var (
		notices  <-chan struct{}
		grants   <-chan string // notices that may tell of a grant to r's owner (Granter)
		listened bool
		logged   bool   // a failed subscription was logged
		subOwner string // the owner a subscription that reads grants is for
		unsub    func() // ends the subscription
		w        waiter
	)
	defer w.stop()
	defer func() {
		if unsub != nil {
			unsub()
		}
	}()
	for {
		if listened && unsub != nil && subOwner != r.owner {
			unsub() // the owner changed (attempt): grants to the new one must wake us
			notices, grants, unsub, listened = nil, nil, nil, false
		}
		if refused == nil {
			l, ref, err := c.attempt(ctx, r)
			switch {
			case errors.Is(err, ErrUnavailable) && ctx.Err() != nil:
				// The call ended with ctx, and its error says why: the backend was unavailable.
			case errors.Is(err, ErrUnavailable):
				ref, err = r.refusal(Acquisition{}, nil), c.down(ctx, r, err)
			case err != nil && r.downErr != nil && ctx.Err() != nil:
				err = display.Errorf("%w; then %w", r.downErr, ctx.Err()) // the call ended with ctx
			case l != nil || ref != nil:
				r.downErr = nil // the backend answered
			}
			if l != nil || err != nil {
				return l, err
			}
			refused = ref
		}
		down := r.downErr != nil
		due, ok := r.retry.next(r.cfg.retry)
		if !ok {
			if down {
				return nil, display.Errorf("%w; the retry strategy gave up", r.downErr)
			}
			return nil, refused
		}
		backoff := time.Until(due)
		if down {
			backoff = min(backoff, maxUnavailableWait)
			if d := r.cfg.down; d > 0 {
				backoff = min(backoff, max(time.Until(r.downSince.Add(d)), 0)) // the last try at the bound
			}
		}
		if !listened && !down {
			// Subscribe only once refused, so an uncontended Lock costs one round trip, then try
			// again at once: a release between the refusal and the subscription sent no notice
			// to us. A backend without notices (or a failed subscription) leaves timers only.
			listened = true
			plain, granted, cancel, err := c.subscribe(ctx, r)
			if err == nil {
				notices, grants, unsub, subOwner = plain, granted, cancel, r.owner
				refused = nil
				continue
			}
			if !logged {
				logged = true
				c.cfg.obs.logSubscribe(ctx, r.key, err)
			}
			if ctx.Err() != nil {
				refused.Err = ctx.Err()
				return nil, refused // obtain says ErrClosed when Close ended ctx
			}
			if errors.Is(err, ErrUnavailable) {
				listened = false // subscribe once the backend is back
			}
		}
		if refused.TTL > 0 && refused.TTL < backoff {
			backoff = refused.TTL
		}
		if r.wait > 0 {
			backoff = min(backoff, r.wait/3) // refresh the queue entry well before it ends
		}
		woke, err := w.wait(ctx, backoff, notices, grants, r.offers())
		if err != nil {
			if down {
				return nil, display.Errorf("%w; then %w", r.downErr, err) // obtain says ErrClosed when Close ended ctx
			}
			refused.Err = err
			return nil, refused // obtain says ErrClosed when Close ended ctx
		}
		r.retry.woke()
		if woke.gift != nil {
			if l := c.claim(ctx, r, r.line, woke.gift); l != nil {
				return l, nil // a permit handed to it in its line
			}
		}
		if l := c.takeGrant(ctx, r, woke.grant); l != nil {
			return l, nil
		}
		refused = nil
	}
}

// Grants between Clients (see Granter). A Lock that waits in the backend's queue asks for a
// grant: the release that frees the key gives it to the first waiter that asked, and its notice
// tells that waiter so, with the ID of the request that queued it; the notices of grants to
// others do not wake it. The waiter's Lock then returns its Lease at once, without a round trip:
// the hold is the backend's already, with the grant's lease, which counts from the send of the
// request that queued the waiter (it reached the backend before the grant). No call confirms it:
// the watchdog renews it, a third into the grant's lease, to the TTL like any lease, and learns
// then whether it is still there; a release ends the grant's record in the queue. So a hand-off
// between Clients costs the taker no round trip, before it starts or after.

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

// maxGrantLease bounds the lease of a grant (AcquireRequest.Grant): a waiter that dies or stalls
// before it takes the key a release granted it holds everyone up for at most this long.
const maxGrantLease = 2 * time.Second

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

// waiter is the timer of a Lock that waits for a wake-up (a release notice, the local turn, a
// permit handed to it), its next try, or the end of its ctx, which also ends at Close (see
// callSet).
type waiter struct{ timer *time.Timer }

// wakeUp is what ended a wait: a value on wake or grants (woken, with the grant's value), a gift
// on offers, or neither (the timer).
type wakeUp struct {
	woken bool
	grant string
	gift  *gift
}

// wait waits for a value on wake, grants or offers, for d, or for ctx to end (then err). A nil
// channel is never ready.
func (w *waiter) wait(ctx context.Context, d time.Duration, wake <-chan struct{}, grants <-chan string, offers <-chan *gift) (wakeUp, error) {
	if w.timer == nil {
		w.timer = time.NewTimer(max(d, 0))
	} else {
		w.timer.Reset(max(d, 0))
	}
	select {
	case <-wake:
		return wakeUp{woken: true}, nil
	case grant := <-grants:
		return wakeUp{woken: true, grant: grant}, nil
	case g := <-offers:
		return wakeUp{woken: true, gift: g}, nil
	case <-w.timer.C:
		return wakeUp{}, nil
	case <-ctx.Done():
		return wakeUp{}, ctx.Err()
	}
}

// stop releases the timer.
func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// down records that an attempt of r found the backend unavailable (err wraps ErrUnavailable),
// logging when a run of such failures begins, and returns the error Lock ends with once the run
// has lasted WithUnavailableTimeout: err, with that said; nil while Lock may try again.
func (c *Client) down(ctx context.Context, r *request, err error) error {
	if r.downErr == nil {
		r.downSince = time.Now()
		c.cfg.obs.logUnavailable(ctx, r.key, r.cfg.down, err)
	}
	r.downErr = err
	if d := r.cfg.down; d > 0 && time.Since(r.downSince) >= d {
		return display.Errorf("%w; gave up after %v (WithUnavailableTimeout)", err, d)
	}
	return nil
}

// loseReentry ends the leases of r's hold that the backend showed gone (those registered before
// r's acquire was sent), and returns the error of a re-entry into a lost hold.
func (c *Client) loseReentry(r *request) error {
	c.mu.Lock()
	if h := c.held[holdID{r.full, r.owner}]; h != nil {
		c.loseUpTo(h, r.idSeq)
	}
	c.mu.Unlock()
	return lostReentry(r.key, r.limit)
}

// lostReentry is the error of a re-entry into a hold that is gone, of a lock or (limit > 0) a
// semaphore's permit.
func lostReentry(key string, limit int) error {
	return display.Errorf("locker: %s %s: re-entry: the owner no longer holds it (released, expired or forced away), and a re-entry never takes a new lock: %w", opName(limit), display.Key(key), ErrLockLost)
}

// opName names the call in errors: "lock" (Lock, TryLock, RLock, TryRLock), or "acquire" for a
// semaphore's permit (limit > 0).
func opName(limit int) string {
	if limit > 0 {
		return "acquire"
	}
	return "lock"
}

// refusal is the error of r refused, as res (its TTL and Taken) says, or cut short by ctx's
// end (err).
func (r *request) refusal(res Acquisition, err error) *NotObtainedError {
	return &NotObtainedError{Key: r.key, TTL: res.TTL, Limit: r.limit, Taken: res.Taken, Err: err}
}

// register records a granted hold: it makes the Lease and its context and hands the hold to the
// watchdog. sent is when the Acquire was sent, seq what opStart returned before it, and lease the
// lease it set (the TTL; a grant's lease for takeGrant).
//
// A grant of a first hold (holds == 1) to an owner this Client already holds leases of means
// that the owner's holds had vanished from the backend (expired, or forced away) before the
// Acquire: those leases are lost. A re-entry granted as a first hold (a backend that ignored
// AcquireRequest.Reentry) is given back and fails with ErrLockLost rather than pass off a fresh
// lock as a re-entry: the outer critical section was not exclusive.
func (c *Client) register(ctx context.Context, r *request, res Acquisition, seq uint64, sent time.Time, lease time.Duration) (*Lease, error) {
	full, owner, holds := r.full, r.owner, res.Holds
	l := c.newLease(ctx, r, res, sent)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.giveBack(ctx, l, ErrClosed)
	}
	id := holdID{full, owner}
	h := c.held[id]
	if h == nil {
		h = &l.own // a new hold lives in its first lease's allocation
		h.id = id
		c.held[id] = h
	}
	if holds == 1 && len(h.leases) > 0 {
		h.dropUpTo(seq, LostGone)
	}
	if holds == 1 && r.reentry {
		if len(h.leases) == 0 {
			delete(c.held, id)
		}
		c.mu.Unlock()
		return nil, c.giveBack(ctx, l, ErrLockLost)
	}
	l.hold = h
	c.seq++
	l.seq = c.seq
	h.add(l)
	h.confirm(seq, c.seq, sent, lease)
	c.wd.arm(c, h.due(!c.wd.renewing))
	c.mu.Unlock()
	return l, nil
}

// newLease makes the Lease of r's grant res (an Acquire sent at sent) and its context, not yet
// registered with a hold.
func (c *Client) newLease(ctx context.Context, r *request, res Acquisition, sent time.Time) *Lease {
	cfg := r.cfg
	l := &Lease{
		client: c, key: r.key, fullKey: r.full, owner: r.owner, token: res.Token,
		holds: res.Holds, ttl: cfg.ttl, unlockTimeout: cfg.unlock, renew: cfg.renew, outer: outerLease(ctx), turn: r.turn,
		shared: r.shared, limit: int32(r.limit), fresh: r.fresh, releaseID: r.releaseID,
	}
	l.values = leaseValues{parent: ctx, lease: l}
	if c.cfg.obs != nil {
		l.granted = sinceEpoch()
		l.values.parent = c.cfg.obs.callerCtx(ctx) // not a span of Observer.Start, which ends with Lock
	}
	r.releaseID = "" // one lease's: another lease of r (none is handed out) makes its own
	if !cfg.renew {
		l.deadline = validUntil(sent, cfg.ttl) // its context's (made by Context)
	}
	return l
}

// giveBack releases a hold that was granted but will not be handed out (nobody would unlock it),
// ends its lease's context, and returns the error for the caller, wrapping cause.
func (c *Client) giveBack(ctx context.Context, l *Lease, cause error) error {
	l.turn = nil // never handed out: the caller leaves the turn
	l.end(cause)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
	defer cancel()
	_, _ = c.backend.Release(rctx, ReleaseRequest{Key: l.fullKey, Owner: l.owner, ID: c.ids.next(), Shared: l.shared, Fresh: l.fresh})
	if cause == ErrLockLost {
		return lostReentry(l.key, int(l.limit))
	}
	return display.Errorf("locker: %s %s: %w", opName(int(l.limit)), display.Key(l.key), cause)
}

// opStart returns the seq of the hold (full, owner) before an operation that will reset its
// lease, for hold.confirm; 0 when there is no such hold. A fresh random owner has none.
func (c *Client) opStart(full, owner string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.held[holdID{full, owner}]; h != nil {
		return h.seq
	}
	return 0
}

// leave is abandon and dequeue, for a call that gives up. When both are due, the Dequeue
// follows the take-back, in its goroutine: the acquire whose outcome is unknown may still reach
// the backend, and queue its owner, until the take-back lands (after it, the acquire is refused
// without queueing), so a Dequeue sent alongside could come first and leave that entry behind
// for its Wait, blocking those behind it.
func (c *Client) leave(r *request) {
	if r.pending && r.queued {
		if q, ok := c.backend.(KindLocker); ok {
			r.queued = false
			key, owner := r.full, r.owner
			c.abandonThen(r, func() { c.dequeueNow(q, key, owner) })
			return
		}
	}
	c.abandon(r)
	c.dequeue(r)
}

// abandon takes back r's acquire whose outcome is unknown, in the background (the caller is
// leaving, perhaps because its ctx ended): if it took effect, its hold is released and waiters
// are woken; if it has not reached the backend yet, it never will take effect.
func (c *Client) abandon(r *request) { c.abandonThen(r, nil) }

// abandonThen is abandon, which calls then (when not nil) in its goroutine once the take-back
// is done. Neither is called when the Client is closed.
func (c *Client) abandonThen(r *request, then func()) {
	if !r.pending {
		return
	}
	r.pending = false
	req := ReleaseRequest{Key: r.full, Owner: r.owner, ID: r.id, Undo: true, Fresh: r.fresh, Shared: r.shared}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		// Close ended this call (or came first): like the Client's leases, a hold the acquire
		// may have left expires with its lease (a queue entry with its Wait), and nothing
		// outlives Close.
		return
	}
	c.undos.Add(1) // Close waits for it
	go func() {
		defer c.undos.Done()
		c.undo(req)
		if then != nil {
			then()
		}
	}()
}

// dequeue takes r's owner out of the key's wait queue, in the background, when a refusal may
// have put it there: the call gives up, and those behind it should not wait for its entry to
// expire.
func (c *Client) dequeue(r *request) {
	if !r.queued {
		return
	}
	r.queued, r.dequeued = false, true
	q, _ := c.backend.(KindLocker)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || q == nil {
		return // the entry expires within its Wait
	}
	// The goroutine takes the names, not r, which then stays on the stack of its Lock.
	key, owner := r.full, r.owner
	c.undos.Add(1) // Close waits for it
	go func() {
		defer c.undos.Done()
		c.dequeueNow(q, key, owner)
	}()
}

// dequeueNow takes owner out of the wait queue of key (its full name), within undoTimeout.
func (c *Client) dequeueNow(q KindLocker, key, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	_ = q.Dequeue(ctx, key, owner)
}

// undoTimeout bounds a background take-back of an acquire, all its attempts together.
const undoTimeout = 5 * time.Second

// undo sends the take-back req of an acquire. While the backend is unavailable (the take-back
// met the same partition or restart as the acquire) it sends it again, 50ms, 100ms, then at most
// maxUnavailableWait apart, within undoTimeout and until Close: a take-back is idempotent (the
// acquire's marker records it), so one whose reply was lost and that is sent again never removes
// a second hold.
func (c *Client) undo(req ReleaseRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	_ = c.releaseWhileUnavailable(ctx, req, 0, c.ctx.Done())
}
