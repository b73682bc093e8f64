package locker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// A Client locks keys on one backend. It generates owner tokens, carries ownership in contexts
// for re-entry, waits for locks (woken by release notices, with a retry strategy as fallback),
// and runs one watchdog that renews every lease it handed out. Create it with New, share it
// between goroutines, and Close it when done. The zero Client is not usable.
type Client struct {
	backend Locker
	cfg     config
	ctx     context.Context // ends at Close: bounds the watchdog's calls and wakes waiting Locks
	stopCtx context.CancelFunc
	ids     idSource // request IDs for Acquire and Release
	calls   callSet  // the calls under way, which Close ends

	mu     sync.Mutex
	closed bool
	undos  sync.WaitGroup   // background take-backs started before Close, which waits for them
	held   map[holdID]*hold // every (key, owner) this Client holds leases of
	seq    uint64           // counts confirmed lease resets, for hold.confirm
	wd     watchdog

	turnMu sync.Mutex       // guards turns and every turn's users; taken after mu, never before
	turns  map[string]*turn // the local queues of Lock calls per backend key
}

// New returns a Client over backend, with opts as the defaults of every call (each call may
// override them). New never fails: a nil backend or an invalid option makes every call of the
// Client return an error wrapping ErrInvalid. The Client does not close the backend: its creator
// owns it.
func New(backend Locker, opts ...Option) *Client {
	cfg := defaultConfig().with(opts)
	if backend == nil {
		cfg.invalid(display.Errorf("%w: nil backend", ErrInvalid))
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Client{
		backend: backend,
		cfg:     cfg,
		ctx:     ctx,
		stopCtx: stop,
		held:    make(map[holdID]*hold),
		turns:   make(map[string]*turn),
		ids:     newIDSource(),
		calls:   callSet{base: ctx},
	}
}

// Lock obtains the lock on key, waiting as long as it takes. ctx bounds the wait and the calls
// Lock makes, not the lease: the Lease's context keeps ctx's values but not its deadline or
// cancellation (see Lease.Context).
//
// If ctx carries the ownership of key (it is, or derives from, a Lease's context), Lock
// re-enters: the owner's hold count grows by one, the lease is reset, and it never waits. A
// re-entry never takes a new lock: when the owner's hold is gone from the backend (it expired
// or was forced away), Lock returns an error wrapping ErrLockLost. Otherwise Lock takes a fresh
// owner token and tries; while another owner holds the lock it waits for a release notice, or
// for the shorter of the holder's remaining lease and the retry strategy's next wait, and tries
// again.
//
// A backend that is unavailable (ErrUnavailable: connection refused or broken, a server restarting
// or failing over) is not contention: Lock tries again, at most 200ms apart, sending the same
// request ID so that an acquire whose reply was lost is not applied twice, for up to
// WithUnavailableTimeout (default 5s) from the first failure, then returns the backend's error,
// which wraps ErrUnavailable and the driver's own error (when ctx ends first, or the retry
// strategy gives up, the error wraps those too), never ErrNotObtained.
//
// It returns an error wrapping ErrNotObtained (a *NotObtainedError) when another owner holds the
// lock and the retry strategy gives up, or ctx ends while waiting (then the error also wraps
// ctx.Err()); ErrInvalid for an empty or too long key, a nil ctx or an invalid option;
// ErrClosed after Close; ErrNotALock when the key holds something else (a value of another
// type); and the backend's error, wrapped, when the backend fails otherwise. Whenever Lock returns an error after an acquire whose outcome it does not
// know (ctx ended during the call, or the backend failed), it takes that acquire back in the
// background (see ReleaseRequest.Undo), sending the take-back again for up to 5s while the
// backend is unavailable, so no hold is left behind for a whole TTL.
func (c *Client) Lock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, true, false)
}

// TryLock makes one attempt to obtain (or re-enter) the lock on key, as Lock does, but does not
// wait: when another owner holds the lock it returns a *NotObtainedError, which wraps
// ErrNotObtained and reports the holder's remaining lease. When the backend fails, TryLock
// returns its error at once (and takes back the acquire, as Lock does).
func (c *Client) TryLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, false, false)
}

// RLock obtains a shared (read) hold on key, waiting as long as it takes, as Lock does: any
// number of owners hold a key shared at once, while an exclusive hold (Lock) excludes them all.
// Readers and writers take turns, as with sync.RWMutex, across processes: once a Lock waits for
// the key, readers that come after it wait behind it, and once an RLock waits, Locks that come
// after it (a writer that unlocks and locks again at once, say) wait behind it; neither starves.
// A waiter that gives up stops blocking the others at once, one whose process died within its
// TTL. TryLock does not wait and is not held back by waiting readers.
//
// Re-entry works through the lease's context as with Lock: RLock with the context of an RLock
// lease adds a shared hold, and RLock with the context of a Lock lease adds a shared hold to the
// writer (a downgrade: after the writer's Unlock the owner still reads, and other readers may
// join). Lock with the context of an RLock lease fails at once with an error wrapping ErrUpgrade
// and changes nothing. Leases of both kinds are renewed by the watchdog and end with the same
// causes. It needs a backend that implements KindLocker (every backend of this module but
// backend/quorum); on another, it returns an error wrapping errors.ErrUnsupported.
func (c *Client) RLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, true, true)
}

// TryRLock makes one attempt to obtain (or re-enter) a shared hold on key, as RLock does, but
// does not wait: while a writer holds or waits for the key it returns a *NotObtainedError.
func (c *Client) TryRLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtainObserved(ctx, key, opts, false, true)
}

// Inspect reports whether key is locked, who holds it (State.Owner, shortened for people), the
// hold count and the remaining lease, as the backend sees it now (with the Client's key
// prefix). A key that holds something else than a lock gives an error wrapping ErrNotALock.
func (c *Client) Inspect(ctx context.Context, key string) (State, error) {
	full, err := c.check(ctx, key, c.cfg)
	if err != nil {
		return State{}, display.Errorf("locker: inspect %s: %w", display.Key(key), err)
	}
	bound, id, cancel := c.calls.begin(ctx)
	st, err := c.backend.Inspect(bound, full)
	c.calls.end(id, cancel)
	if err != nil {
		return State{}, display.Errorf("locker: inspect %s: %w", display.Key(key), c.closedErr(ctx, err))
	}
	st.Owner = display.Owner(st.Owner)
	return st, nil
}

// ForceUnlock deletes the lock on key whoever holds it, wakes its waiters, and reports whether
// there was a lock to delete. It is for operators (a holder that is stuck), not for normal
// release: the holder is not asked. Leases of this Client on key end at once with ErrLockLost;
// other holders learn of it at their next renewal. A key that holds something else than a lock
// is left as it is, with an error wrapping ErrNotALock.
func (c *Client) ForceUnlock(ctx context.Context, key string) (bool, error) {
	full, err := c.check(ctx, key, c.cfg)
	if err != nil {
		return false, display.Errorf("locker: force unlock %s: %w", display.Key(key), err)
	}
	bound, id, cancel := c.calls.begin(ctx)
	removed, err := c.backend.ForceRelease(bound, full)
	c.calls.end(id, cancel)
	if err != nil {
		return false, display.Errorf("locker: force unlock %s: %w", display.Key(key), c.closedErr(ctx, err))
	}
	c.loseKey(full)
	return removed, nil
}

// Close stops the watchdog and ends the context of every lease of this Client with cause
// ErrClosed. It does not release the locks (work may still be running under them): they expire
// after their TTL unless their Leases are unlocked, which still works after Close (an Unlock
// under way goes on, within its WithUnlockTimeout). Lock, TryLock, Inspect and ForceUnlock calls
// under way return ErrClosed at once, even while they wait for the server; an acquire of theirs
// whose outcome is unknown is not taken back (a hold it may have left expires with its lease, as
// the leases do). A background take-back begun before Close (see Lock) finishes the attempt it is
// making (within 5s), and Close waits for it, but it is not sent again. Close leaves no goroutine
// behind and returns nil; calling it again does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.stopCtx()
	c.calls.close()
	for _, h := range c.held {
		h.end(ErrClosed)
	}
	c.held = nil
	c.wd.stop()
	c.mu.Unlock()
	c.wd.wait()
	c.undos.Wait()
	return nil
}

// check validates the arguments common to every call and returns the backend key.
func (c *Client) check(ctx context.Context, key string, cfg config) (string, error) {
	switch {
	case ctx == nil:
		return "", display.Errorf("%w: nil context", ErrInvalid)
	case cfg.err != nil:
		return "", cfg.err
	case key == "":
		return "", display.Errorf("%w: empty key", ErrInvalid)
	case len(cfg.prefix)+len(key) > MaxKeyLen:
		return "", display.Errorf("%w: key of %d bytes is over the limit of %d", ErrInvalid, len(cfg.prefix)+len(key), MaxKeyLen)
	}
	if err := ctx.Err(); err != nil {
		// A lease's context ends with a cause (ErrLockLost, ErrClosed): say it.
		if cause := context.Cause(ctx); cause != err {
			return "", display.Errorf("%w: %w", err, cause)
		}
		return "", err
	}
	select {
	case <-c.ctx.Done():
		return "", ErrClosed
	default:
	}
	return cfg.prefix + key, nil
}

// request is one Lock or TryLock call, resolved.
type request struct {
	key, full, owner string
	cfg              config
	fresh            bool          // owner is a new random token (not re-entry, not WithOwner)
	reentry          bool          // only re-enter the owner's hold (carried by ctx, or WithHeldOwner)
	shared           bool          // a shared hold (RLock)
	wait             time.Duration // AcquireRequest.Wait: the queue entry a refusal leaves
	downSince        time.Time     // the first failure of a run of attempts that found the backend unavailable
	downErr          error         // the latest of those failures; nil while the backend answers
	grant            time.Duration // AcquireRequest.Grant: a release may grant it the key (Granter)
	queued           bool          // a refusal may have left an entry in the key's queue
	dequeued         bool          // a Dequeue of its owner was sent: it may give back a later grant
	turn             *turn         // the local turn this call holds, handed to its Lease

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

// obtain is Lock (wait == true) and TryLock.
//
// Lock calls of one Client with fresh owners on one key queue locally (see turn): while any of
// them waits or holds the lock through this Client, the others wait for their turn without a
// round trip, so a releaser that locks again at once cannot overtake them, and only one of them
// polls or listens on the backend.
func (c *Client) obtain(ctx context.Context, key string, opts []Option, wait, shared bool) (_ *Lease, err error) {
	cfg := c.cfg.with(opts)
	full, err := c.check(ctx, key, cfg)
	_, kinds := c.backend.(KindLocker)
	if err == nil && (shared || cfg.fair) && !kinds {
		err = display.Errorf("the backend (%T) has no shared holds or wait queues (it is no locker.KindLocker): %w", c.backend, errors.ErrUnsupported)
	}
	if err != nil {
		return nil, display.Errorf("locker: lock %s: %w", display.Key(key), err)
	}
	// Every backend call below is bounded by ctx and by Close; the Lease keeps ctx's values.
	callerCtx := ctx
	ctx, id, cancel := c.calls.begin(ctx)
	defer func() {
		c.calls.end(id, cancel)
		if err != nil && !errors.Is(err, ErrClosed) && callerCtx.Err() == nil && c.ctx.Err() != nil {
			err = display.Errorf("locker: lock %s: %w", display.Key(key), ErrClosed)
		}
	}()
	r := &request{key: key, full: full, owner: cfg.owner, reentry: cfg.heldOwner, cfg: cfg, shared: shared}
	if r.owner == "" {
		if carrier := carrierOf(ctx, full); carrier != nil {
			if errors.Is(context.Cause(carrier.Context()), ErrLockLost) {
				return nil, lostReentry(key) // the Client saw the hold go
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
	if _, granter := c.backend.(Granter); granter && r.wait > 0 && r.fresh && !shared {
		r.grant = min(cfg.ttl, maxGrantLease) // a release may hand the key to it
	}
	// A Lock that never retries behaves as TryLock; readers and fair calls queue on the backend.
	queue := wait && r.fresh && mayRetry && !shared && !cfg.fair
	defer func() {
		if err != nil {
			c.leave(r)
		}
	}()

	var t *turn
	if queue {
		t = c.queuedTurn(full)
	}
	var refused *NotObtainedError
	if t == nil {
		l, ref, err := c.attempt(ctx, r)
		if wait && mayRetry && errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			ref, err = &NotObtainedError{Key: r.key}, c.down(ctx, r, err) // wait and try again
		}
		if l != nil || err != nil {
			return l, err
		}
		if !wait {
			return nil, ref
		}
		refused = ref
		if queue {
			t = c.joinTurn(full)
		}
	}
	if t == nil {
		return c.contend(ctx, r, refused, 0)
	}
	n, err := c.takeTurn(ctx, r, t)
	if err != nil {
		c.leaveTurn(full, t, false)
		return nil, err
	}
	r.turn = t
	if l := c.claimHandOff(ctx, r); l != nil {
		return l, nil
	}
	l, err := c.contend(ctx, r, refused, n)
	if err != nil {
		c.leaveTurn(full, t, true)
	}
	return l, err
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
		Reentry: r.reentry, Shared: r.shared, Fair: r.cfg.fair, Wait: r.wait, Grant: r.grant,
	})
	r.queued = r.queued || r.wait > 0
	if err != nil {
		// These errors say that nothing was done; any other leaves the outcome unknown.
		r.pending = !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrNotALock) &&
			!errors.Is(err, ErrUpgrade)
		switch {
		case r.reentry && errors.Is(err, ErrNotHeld):
			return nil, nil, c.loseReentry(r)
		case ctx.Err() != nil && !errors.Is(err, ErrUnavailable):
			return nil, nil, &NotObtainedError{Key: r.key, Err: ctx.Err()}
		}
		return nil, nil, display.Errorf("locker: lock %s: %w", display.Key(r.key), err)
	}
	r.pending = false
	if res.Acquired() && !r.reentry {
		r.queued = false // a new hold takes its owner out of the queue
	}
	if !res.Acquired() {
		if r.reentry {
			return nil, nil, c.loseReentry(r) // another owner holds the key: ours is gone
		}
		return nil, &NotObtainedError{Key: r.key, TTL: res.TTL}, nil
	}
	l, err := c.register(ctx, r, res, r.idSeq, r.idSent, r.cfg.ttl)
	return l, nil, err
}

// abandon takes back r's acquire whose outcome is unknown, in the background (the caller is
// leaving, perhaps because its ctx ended): if it took effect, its hold is released and waiters
// are woken; if it has not reached the backend yet, it never will take effect.
func (c *Client) abandon(r *request) { c.abandonThen(r, nil) }

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

// contend tries until the lock is granted, the retry strategy gives up, ctx ends or the Client
// closes. refused is the refusal of an attempt just made (nil: start with an attempt); retries
// the strategy's count so far. Between attempts it waits for a release notice, or for the
// shorter of the holder's remaining lease and the strategy's next wait.
func (c *Client) contend(ctx context.Context, r *request, refused *NotObtainedError, retries int) (*Lease, error) {
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
				ref, err = &NotObtainedError{Key: r.key}, c.down(ctx, r, err)
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
		backoff, ok := r.cfg.retry.Backoff(retries)
		if !ok {
			if down {
				return nil, display.Errorf("%w; the retry strategy gave up", r.downErr)
			}
			return nil, refused
		}
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
				c.logSubscribe(ctx, r.key, err)
			}
			if ctx.Err() != nil {
				refused.Err = ctx.Err()
				return nil, refused // obtain says ErrClosed when Close ended ctx
			}
			if errors.Is(err, ErrUnavailable) {
				listened = false // subscribe once the backend is back
			}
		}
		retries++
		if refused.TTL > 0 && refused.TTL < backoff {
			backoff = refused.TTL
		}
		if r.wait > 0 {
			backoff = min(backoff, r.wait/3) // refresh the queue entry well before it ends
		}
		_, grant, err := w.wait(ctx, backoff, notices, grants)
		if err != nil {
			if down {
				return nil, display.Errorf("%w; then %w", r.downErr, err) // obtain says ErrClosed when Close ended ctx
			}
			refused.Err = err
			return nil, refused // obtain says ErrClosed when Close ended ctx
		}
		if l := c.takeGrant(ctx, r, grant); l != nil {
			return l, nil
		}
		refused = nil
	}
}

// loseReentry ends the leases of r's hold that the backend showed gone (those registered before
// r's acquire was sent), and returns the error of a re-entry into a lost hold.
func (c *Client) loseReentry(r *request) error {
	c.mu.Lock()
	if h := c.held[holdID{r.full, r.owner}]; h != nil {
		c.loseUpTo(h, r.idSeq)
	}
	c.mu.Unlock()
	return lostReentry(r.key)
}

// lostReentry is the error of a re-entry into a hold that is gone.
func lostReentry(key string) error {
	return display.Errorf("locker: lock %s: re-entry: the owner no longer holds it (released, expired or forced away), and a re-entry never takes a new lock: %w", display.Key(key), ErrLockLost)
}

// maxUnavailableWait is the longest Lock waits before trying again after the backend was
// unavailable, so that it gets the lock soon after the backend is back.
const maxUnavailableWait = 200 * time.Millisecond

// down records that an attempt of r found the backend unavailable (err wraps ErrUnavailable),
// logging when a run of such failures begins, and returns the error Lock ends with once the run
// has lasted WithUnavailableTimeout: err, with that said; nil while Lock may try again.
func (c *Client) down(ctx context.Context, r *request, err error) error {
	if r.downErr == nil {
		r.downSince = time.Now()
		c.logUnavailable(ctx, r.key, r.cfg.down, err)
	}
	r.downErr = err
	if d := r.cfg.down; d > 0 && time.Since(r.downSince) >= d {
		return display.Errorf("%w; gave up after %v (WithUnavailableTimeout)", err, d)
	}
	return nil
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
		shared: r.shared, fresh: r.fresh, releaseID: r.releaseID,
	}
	l.values = leaseValues{parent: ctx, lease: l}
	if c.cfg.obs != nil {
		l.granted = sinceEpoch()
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
		return lostReentry(l.key)
	}
	return display.Errorf("locker: lock %s: %w", display.Key(l.key), cause)
}

// loseUpTo drops the leases of h registered at or before seq (see hold.dropUpTo), and forgets h
// when none is left. Client.mu is held.
func (c *Client) loseUpTo(h *hold, seq uint64) {
	h.dropUpTo(seq, LostGone)
	if len(h.leases) == 0 && c.held[h.id] == h {
		delete(c.held, h.id)
	}
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

// loseKey ends every lease of this Client on the backend key full with ErrLockLost.
func (c *Client) loseKey(full string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, h := range c.held {
		if id.key == full {
			delete(c.held, id)
			h.lose(LostForced)
		}
	}
}

// closedErr returns ErrClosed for an error that came from the Close of the Client rather than from
// the caller's ctx or the backend, and err otherwise.
func (c *Client) closedErr(ctx context.Context, err error) error {
	if c.ctx.Err() != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		return ErrClosed
	}
	return err
}
