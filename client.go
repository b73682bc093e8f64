package locker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
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

	mu     sync.Mutex
	closed bool
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
		cfg.invalid(fmt.Errorf("%w: nil backend", ErrInvalid))
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Client{
		backend: backend,
		cfg:     cfg,
		ctx:     ctx,
		stopCtx: stop,
		held:    make(map[holdID]*hold),
		turns:   make(map[string]*turn),
	}
}

// Lock obtains the lock on key, waiting as long as it takes. If ctx carries the ownership of key
// (it is, or derives from, a Lease's context), Lock re-enters: the owner's hold count grows by
// one, the lease is reset, and it never waits. Otherwise it takes a fresh owner token and tries;
// while another owner holds the lock it waits for a release notice, or for the shorter of the
// holder's remaining lease and the retry strategy's next wait, and tries again.
//
// It returns an error wrapping ErrNotObtained (a *NotObtainedError) when the retry strategy gives
// up, or when ctx ends while waiting (then the error also wraps ctx.Err()); ErrInvalid for an
// empty or too long key, a nil ctx or an invalid option; ErrClosed after Close; and the
// backend's error, wrapped, when the backend fails.
func (c *Client) Lock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtain(ctx, key, opts, true)
}

// TryLock makes one attempt to obtain (or re-enter) the lock on key, as Lock does, but does not
// wait: when another owner holds the lock it returns a *NotObtainedError, which wraps
// ErrNotObtained and reports the holder's remaining lease.
func (c *Client) TryLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.obtain(ctx, key, opts, false)
}

// Inspect reports whether key is locked, the holder's hold count and its remaining lease, as
// the backend sees it now (with the Client's key prefix).
func (c *Client) Inspect(ctx context.Context, key string) (State, error) {
	full, err := c.check(ctx, key, c.cfg)
	if err != nil {
		return State{}, fmt.Errorf("locker: inspect: %w", err)
	}
	st, err := c.backend.Inspect(ctx, full)
	if err != nil {
		return State{}, fmt.Errorf("locker: inspect %q: %w", key, err)
	}
	return st, nil
}

// ForceUnlock deletes the lock on key whoever holds it, wakes its waiters, and reports whether
// there was a lock to delete. It is for operators (a holder that is stuck), not for normal
// release: the holder is not asked. Leases of this Client on key end at once with ErrLockLost;
// other holders learn of it at their next renewal.
func (c *Client) ForceUnlock(ctx context.Context, key string) (bool, error) {
	full, err := c.check(ctx, key, c.cfg)
	if err != nil {
		return false, fmt.Errorf("locker: force unlock: %w", err)
	}
	removed, err := c.backend.ForceRelease(ctx, full)
	if err != nil {
		return false, fmt.Errorf("locker: force unlock %q: %w", key, err)
	}
	c.loseKey(full)
	return removed, nil
}

// Close stops the watchdog and ends the context of every lease of this Client with cause
// ErrClosed. It does not release the locks (work may still be running under them): they expire
// after their TTL unless their Leases are unlocked, which still works after Close. Waiting Locks
// return ErrClosed. Close leaves no goroutine behind and returns nil; calling it again does
// nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.stopCtx()
	for _, h := range c.held {
		h.end(ErrClosed)
	}
	c.held = nil
	c.wd.stop()
	c.mu.Unlock()
	c.wd.wait()
	return nil
}

// check validates the arguments common to every call and returns the backend key.
func (c *Client) check(ctx context.Context, key string, cfg config) (string, error) {
	switch {
	case ctx == nil:
		return "", fmt.Errorf("%w: nil context", ErrInvalid)
	case cfg.err != nil:
		return "", cfg.err
	case key == "":
		return "", fmt.Errorf("%w: empty key", ErrInvalid)
	case len(cfg.prefix)+len(key) > MaxKeyLen:
		return "", fmt.Errorf("%w: key of %d bytes is over the limit of %d", ErrInvalid, len(cfg.prefix)+len(key), MaxKeyLen)
	}
	if err := ctx.Err(); err != nil {
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
	fresh            bool   // owner is a new random token (not re-entry, not WithOwner)
	carrier          *Lease // the lease whose context carried the owner, for a nested re-entry
	turn             *turn  // the local turn this call holds, handed to its Lease
}

// obtain is Lock (wait == true) and TryLock.
//
// Lock calls of one Client with fresh owners on one key queue locally (see turn): while any of
// them waits or holds the lock through this Client, the others wait for their turn without a
// round trip, so a releaser that locks again at once cannot overtake them, and only one of them
// polls or listens on the backend.
func (c *Client) obtain(ctx context.Context, key string, opts []Option, wait bool) (*Lease, error) {
	cfg := c.cfg.with(opts)
	full, err := c.check(ctx, key, cfg)
	if err != nil {
		return nil, fmt.Errorf("locker: lock %q: %w", key, err)
	}
	r := &request{key: key, full: full, owner: cfg.owner, cfg: cfg}
	if r.owner == "" {
		if r.carrier = carrierOf(ctx, full); r.carrier != nil {
			r.owner = r.carrier.owner
		}
	}
	if r.fresh = r.owner == ""; r.fresh {
		r.owner = newOwnerToken()
	}
	_, mayRetry := cfg.retry.Backoff(0)
	queue := wait && r.fresh && mayRetry // a Lock that never retries behaves as TryLock

	var t *turn
	if queue {
		t = c.queuedTurn(full)
	}
	var refused *NotObtainedError
	if t == nil {
		l, ref, err := c.attempt(ctx, r)
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
	l, err := c.contend(ctx, r, refused, n)
	if err != nil {
		c.leaveTurn(full, t, true)
	}
	return l, err
}

// attempt makes one Acquire: it returns the Lease when granted, or the refusal.
func (c *Client) attempt(ctx context.Context, r *request) (*Lease, *NotObtainedError, error) {
	var seq uint64
	if !r.fresh {
		seq = c.opStart(r.full, r.owner)
	}
	sent := time.Now()
	res, err := c.backend.Acquire(ctx, r.full, r.owner, r.cfg.ttl)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, &NotObtainedError{Key: r.key, Err: ctx.Err()}
		}
		return nil, nil, fmt.Errorf("locker: lock %q: %w", r.key, err)
	}
	if !res.Acquired() {
		return nil, &NotObtainedError{Key: r.key, TTL: res.TTL}, nil
	}
	l, err := c.register(ctx, r, res.Holds, seq, sent)
	return l, nil, err
}

// contend tries until the lock is granted, the retry strategy gives up, ctx ends or the Client
// closes. refused is the refusal of an attempt just made (nil: start with an attempt); retries
// the strategy's count so far. Between attempts it waits for a release notice, or for the
// shorter of the holder's remaining lease and the strategy's next wait.
func (c *Client) contend(ctx context.Context, r *request, refused *NotObtainedError, retries int) (*Lease, error) {
	var (
		notices  <-chan struct{}
		listened bool
		timer    *time.Timer
	)
	for {
		if refused == nil {
			l, ref, err := c.attempt(ctx, r)
			if l != nil || err != nil {
				return l, err
			}
			refused = ref
		}
		backoff, ok := r.cfg.retry.Backoff(retries)
		if !ok {
			return nil, refused
		}
		if !listened {
			// Subscribe only once refused, so an uncontended Lock costs one round trip, then try
			// again at once: a release between the refusal and the subscription sent no notice
			// to us. A backend without notices (or a failed subscription) leaves timers only.
			listened = true
			ch, cancel, err := c.backend.Subscribe(ctx, r.full)
			if err == nil {
				defer cancel()
				notices = ch
				refused = nil
				continue
			}
			if ctx.Err() != nil {
				refused.Err = ctx.Err()
				return nil, refused
			}
		}
		retries++
		if refused.TTL > 0 && refused.TTL < backoff {
			backoff = refused.TTL
		}
		if timer == nil {
			timer = time.NewTimer(max(backoff, 0))
			defer timer.Stop()
		} else {
			timer.Reset(max(backoff, 0))
		}
		select {
		case <-notices:
		case <-timer.C:
		case <-ctx.Done():
			refused.Err = ctx.Err()
			return nil, refused
		case <-c.ctx.Done():
			return nil, fmt.Errorf("locker: lock %q: %w", r.key, ErrClosed)
		}
		refused = nil
	}
}

// register records a granted hold: it makes the Lease and its context and hands the hold to the
// watchdog. sent is when the Acquire was sent, seq what opStart returned before it.
//
// A grant of a first hold (holds == 1) to an owner this Client already holds leases of means
// that the owner's holds had vanished from the backend (expired, or forced away) before the
// Acquire: those leases are lost. A nested re-entry through such a lease's context then fails
// with ErrLockLost rather than pass off a fresh lock as a re-entry: the outer critical section
// was not exclusive.
func (c *Client) register(ctx context.Context, r *request, holds int, seq uint64, sent time.Time) (*Lease, error) {
	key, full, owner, cfg := r.key, r.full, r.owner, r.cfg
	l := &Lease{
		client: c, key: key, fullKey: full, owner: owner,
		holds: holds, ttl: cfg.ttl, renew: cfg.renew, outer: outerLease(ctx), turn: r.turn,
	}
	l.ctx, l.cancel = context.WithCancelCause(context.WithValue(ctx, ownershipKey{}, l))
	if !cfg.renew {
		l.ctx, l.stop = context.WithDeadlineCause(l.ctx, validUntil(sent, cfg.ttl), ErrLockLost)
	}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.giveBack(ctx, l, ErrClosed)
	}
	id := holdID{full, owner}
	h := c.held[id]
	if h == nil {
		h = &hold{id: id}
		c.held[id] = h
	}
	if holds == 1 && len(h.leases) > 0 {
		lost := h.dropUpTo(seq)
		if r.carrier != nil && slices.Contains(lost, r.carrier) {
			if len(h.leases) == 0 {
				delete(c.held, id)
			}
			c.mu.Unlock()
			return nil, c.giveBack(ctx, l, ErrLockLost)
		}
	}
	l.hold = h
	c.seq++
	l.seq = c.seq
	h.add(l)
	h.confirm(seq, c.seq, sent, cfg.ttl)
	c.wd.arm(c, h.due(!c.wd.renewing))
	c.mu.Unlock()
	return l, nil
}

// giveBack releases a hold that was granted but will not be handed out (nobody would unlock it),
// ends its lease's context, and returns the error for the caller, wrapping cause.
func (c *Client) giveBack(ctx context.Context, l *Lease, cause error) error {
	l.turn = nil // never handed out: the caller leaves the turn
	l.end(cause)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
	defer cancel()
	_, _ = c.backend.Release(rctx, l.fullKey, l.owner)
	if cause == ErrLockLost {
		return fmt.Errorf("locker: lock %q: re-entry found the outer hold gone from the backend: %w", l.key, cause)
	}
	return fmt.Errorf("locker: lock %q: %w", l.key, cause)
}

// loseUpTo drops the leases of h registered at or before seq (see hold.dropUpTo), and forgets h
// when none is left. Client.mu is held.
func (c *Client) loseUpTo(h *hold, seq uint64) {
	h.dropUpTo(seq)
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
			h.end(ErrLockLost)
		}
	}
}
