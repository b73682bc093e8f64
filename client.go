package locker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

	turns turnSet // the local queues of Lock calls per backend key
}

// New returns a Client over backend, with opts as the defaults of every call (each call may
// override them). New never fails: a nil backend or an invalid option makes every call of the
// Client return an error wrapping ErrInvalid. The Client does not close the backend: its creator
// owns it.
func New(backend Locker, opts ...Option) *Client {
	cfg := defaultConfig().apply(opts)
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
		turns:   turnSet{m: make(map[string]*turn)},
		ids:     newIDSource(),
		calls:   callSet{base: ctx},
	}
}

// Inspect reports whether key is locked, who holds it (State.Owner, shortened for people), the
// hold count and the remaining lease, every holder (State.Holders, shortened likewise) and, for a
// semaphore, its number of permits (State.Limit), as the backend sees it now (with the Client's
// key prefix). A key that holds something else than a lock gives an error wrapping ErrNotALock.
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
	for i := range st.Holders {
		st.Holders[i].Owner = display.Owner(st.Holders[i].Owner)
	}
	return st, nil
}

// ForceUnlock deletes the lock on key whoever holds it, wakes its waiters, and reports whether
// there was a lock to delete. It is for operators (a holder that is stuck), not for normal
// release: the holder is not asked. Leases of this Client on key end at once with ErrLockLost;
// other holders learn of it at their next renewal. A key that holds something else than a lock
// is left as it is, with an error wrapping ErrNotALock.
func (c *Client) ForceUnlock(ctx context.Context, key string) (bool, error) {
	o := c.cfg.obs
	if o == nil || o.ForceUnlock == nil {
		return c.forceUnlock(ctx, key)
	}
	start := time.Now()
	removed, err := c.forceUnlock(ctx, key)
	if ctx == nil {
		ctx = context.Background()
	}
	o.ForceUnlock(ctx, ForceUnlockEvent{Key: key, Removed: removed, Duration: time.Since(start), Err: err})
	return removed, err
}

// forceUnlock is ForceUnlock, without the Observer.
func (c *Client) forceUnlock(ctx context.Context, key string) (bool, error) {
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

// callSet is the set of a Client's calls under way (Lock, TryLock, Inspect, ForceUnlock): Close
// cancels their contexts, so that a call waiting for the backend ends at once.
type callSet struct {
	base context.Context // the Client's, which Close cancels first: the end of a call whose ctx has none

	mu      sync.Mutex
	closed  bool
	next    uint64
	cancels map[uint64]context.CancelFunc
}

// begin returns a ctx for one call's backend calls: ctx, ending also at close. Pass id and
// cancel to end when the call is done. A ctx that never ends (Done is nil: Background, TODO, or
// one of their values) costs neither a context nor a place in the set: the call ends at Close,
// as its closingCtx tells.
func (s *callSet) begin(ctx context.Context) (_ context.Context, id uint64, cancel context.CancelFunc) {
	if ctx.Done() == nil && s.base != nil {
		return &closingCtx{Context: ctx, client: s.base}, 0, endNothing
	}
	ctx, cancel = context.WithCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return ctx, 0, cancel
	}
	if s.cancels == nil {
		s.cancels = make(map[uint64]context.CancelFunc)
	}
	s.next++
	s.cancels[s.next] = cancel
	return ctx, s.next, cancel
}

// end releases what begin returned.
func (s *callSet) end(id uint64, cancel context.CancelFunc) {
	if id == 0 {
		cancel()
		return
	}
	s.mu.Lock()
	delete(s.cancels, id)
	s.mu.Unlock()
	cancel()
}

// close cancels every call under way and every later one.
func (s *callSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, cancel := range s.cancels {
		cancel()
	}
	s.cancels = nil
}

// endNothing is the cancel function of a closingCtx: it has nothing to release.
func endNothing() {}

// closingCtx is the ctx of a call whose own ctx never ends: it has that ctx's values, and the end
// of the Client's context (Done, Err, and AfterFunc, so that a context derived from it for a
// backend call is cancelled at Close without a goroutine of package context to watch it).
type closingCtx struct {
	context.Context                 // the call's own: its values
	client          context.Context // the Client's: cancelled at Close, never before, no deadline
}

func (c *closingCtx) Deadline() (time.Time, bool) { return c.client.Deadline() }

func (c *closingCtx) Done() <-chan struct{} { return c.client.Done() }

func (c *closingCtx) Err() error { return c.client.Err() }

func (c *closingCtx) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.client, f) }

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

// The watchdog is one timer per Client, not a goroutine per lease; its work is in
// watchdog.go (tick).
type watchdog struct {
	timer    *time.Timer    // created on first use, inside the caller's synctest bubble if any
	at       time.Time      // when the timer fires; zero when not armed
	renewing bool           // a Renew call is in flight
	ticks    sync.WaitGroup // running ticks, waited for by Close
}

// arm makes the timer fire at t or earlier. Client.mu is held.
func (w *watchdog) arm(c *Client, t time.Time) {
	if t.IsZero() || (!w.at.IsZero() && !t.Before(w.at)) {
		return
	}
	w.at = t
	d := time.Until(t)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, c.tick)
		return
	}
	w.timer.Reset(d)
}

// stop disarms the timer. Client.mu is held.
func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.at = time.Time{}
}

// wait waits for running ticks to finish. Client.mu is not held.
func (w *watchdog) wait() { w.ticks.Wait() }

// A turnSet is a Client's turns, by backend key.
type turnSet struct {
	mu sync.Mutex // guards m and every turn's users and hand-offs; taken after Client.mu, never before
	m  map[string]*turn
}

// queued returns the key's turn and joins it, if one exists (others wait or hold).
func (s *turnSet) queued(key string) *turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.m[key]
	if t != nil {
		t.users++
	}
	return t
}

// join joins the key's turn, making it (with its token free) if there is none: a line of
// permits (permits.go), which Unlock may hand permits to, when permits.
func (s *turnSet) join(key string, permits bool) *turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.m[key]
	if t == nil {
		t = &turn{token: make(chan struct{}, 1)}
		if permits {
			t.offer = make(chan *gift)
		}
		t.token <- struct{}{}
		s.m[key] = t
	}
	t.users++
	return t
}

// leave leaves the key's turn, handing the token on when holding it.
func (s *turnSet) leave(key string, t *turn, holding bool) {
	if holding {
		t.token <- struct{}{} // never blocks: only the holder puts the token back
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.users--; t.users == 0 && s.m[key] == t {
		delete(s.m, key)
	}
	if g := t.gift; t.users == 0 && g != nil {
		t.gift = nil
		close(g.ready) // dropped: every waiter left before claiming it; the giver releases
	}
}

// idSource makes request IDs: a random 96-bit prefix per Client and a counter, so IDs never
// repeat across Clients and processes (see AcquireRequest.ID).
type idSource struct {
	prefix string
	n      atomic.Uint64
}

func newIDSource() idSource {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return idSource{prefix: base64.RawURLEncoding.EncodeToString(b[:]) + "."}
}

// next returns a fresh request ID, in one allocation.
func (s *idSource) next() string {
	var buf [48]byte
	b := append(buf[:0], s.prefix...)
	return string(strconv.AppendUint(b, s.n.Add(1), 36))
}

// start returns what a Lock call needs at its start, in one allocation: the request ID of its
// first acquire, the request ID of the release of its lease, and, when fresh, a new owner token
// (as newOwnerToken makes it, after label).
func (s *idSource) start(label string, fresh bool) (owner, acquire, release string) {
	n := s.n.Add(2)
	var b strings.Builder
	size := 2 * (len(s.prefix) + 13) // 13: the most base-36 digits of a uint64
	if fresh {
		size += ownerTokenLen(label)
	}
	b.Grow(size)
	if fresh {
		appendOwnerToken(&b, label)
	}
	o := b.Len()
	var digits [16]byte
	b.WriteString(s.prefix)
	b.Write(strconv.AppendUint(digits[:0], n-1, 36))
	a := b.Len()
	b.WriteString(s.prefix)
	b.Write(strconv.AppendUint(digits[:0], n, 36))
	all := b.String()
	return all[:o], all[o:a], all[a:]
}

// newOwnerToken returns a fresh owner token: 128 random bits, hex-encoded, after label and '#'
// when label is not empty (see WithOwnerLabel).
func newOwnerToken(label string) string {
	var b strings.Builder
	b.Grow(ownerTokenLen(label))
	appendOwnerToken(&b, label)
	return b.String()
}

// ownerTokenLen is the length of an owner token after label.
func ownerTokenLen(label string) int {
	if label == "" {
		return 2 * ownerTokenBytes
	}
	return len(label) + 1 + 2*ownerTokenBytes
}

// ownerTokenBytes is how many random bytes an owner token has.
const ownerTokenBytes = 16

// appendOwnerToken writes a fresh owner token after label to b.
func appendOwnerToken(b *strings.Builder, label string) {
	var random [ownerTokenBytes]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never returns an error (Go ≥ 1.24).
	if label != "" {
		b.WriteString(label)
		b.WriteByte(display.LabelSep)
	}
	var h [2 * ownerTokenBytes]byte
	hex.Encode(h[:], random[:])
	b.Write(h[:])
}
