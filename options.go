package locker

import (
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashlock/locker/internal/display"
)

// Defaults and limits of the options.
const (
	// DefaultTTL is the lease length when no WithTTL is given.
	DefaultTTL = 30 * time.Second
	// DefaultUnlockTimeout bounds an Unlock, all its attempts together, when no
	// WithUnlockTimeout is given.
	DefaultUnlockTimeout = 5 * time.Second
	// DefaultUnavailableTimeout is how long Lock and RLock keep trying while the backend is
	// unavailable, when no WithUnavailableTimeout is given.
	DefaultUnavailableTimeout = 5 * time.Second
	// MinTTL is the shortest lease accepted: backends count leases in whole milliseconds.
	MinTTL = time.Millisecond
	// MaxKeyLen is the longest key accepted, in bytes, key prefix included.
	MaxKeyLen = 64 << 10
	// MaxOwnerLen is the longest owner identity accepted by WithOwner, in bytes.
	MaxOwnerLen = 1 << 10
	// MaxLabelLen is the longest owner label accepted by WithOwnerLabel, in bytes.
	MaxLabelLen = 256
)

// defaultRetry is the fallback wait between attempts when no release notice comes: short at
// first, for locks that are released without a notice, then at most once a second.
var defaultRetry = ExponentialBackoff(16*time.Millisecond, time.Second)

// An Option configures a Client (as its default, in New) or a single Lock or TryLock call (over
// the Client's defaults). Options that do not apply to a call are ignored by it.
type Option func(*config)

// config is the resolved set of options of a Client or of one call.
type config struct {
	ttl    time.Duration
	retry  RetryStrategy
	owner  string
	label  string // put in front of fresh owner tokens (WithOwnerLabel)
	prefix string
	unlock time.Duration // bound of an Unlock (WithUnlockTimeout)
	down   time.Duration // how long Lock tries while the backend is unavailable; 0: no bound
	obs    *observers    // WithObserver, WithLogger; only the Client's are used
	err    error         // the first invalid option, reported by every call that uses this config

	// The flags, together: a Lock call copies config into its request.
	renew     bool
	heldOwner bool // owner's hold may only be re-entered (WithHeldOwner)
	fence     bool
	fair      bool // Lock and RLock wait in the key's queue (WithFair)
}

func defaultConfig() config {
	return config{ttl: DefaultTTL, renew: true, retry: defaultRetry, unlock: DefaultUnlockTimeout, down: DefaultUnavailableTimeout}
}

// apply returns c with opts applied in order. A call without options skips it, so that its
// config does not move to the heap.
func (c config) apply(opts []Option) config {
	for _, opt := range opts {
		if opt == nil {
			c.invalid(display.Errorf("%w: nil Option", ErrInvalid))
			continue
		}
		opt(&c)
	}
	return c
}

func (c *config) invalid(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithTTL sets the lease length: how long the backend keeps a hold without renewal. The watchdog
// renews a lease every TTL/3, so a holder that stops (crash, partition) blocks others for at most
// about one TTL. Default DefaultTTL (30s); minimum MinTTL (1ms); it is rounded up to whole
// milliseconds on the backend.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d < MinTTL {
			c.invalid(display.Errorf("%w: TTL %v is below the minimum of %v", ErrInvalid, d, MinTTL))
			return
		}
		c.ttl = d
	}
}

// WithoutRenewal makes the lease fixed: the watchdog does not renew it, the lock expires TTL
// after it was acquired, and the lease's context ends just before that (see Lease.Context).
// Default: leases are renewed until Unlock.
func WithoutRenewal() Option {
	return func(c *config) { c.renew = false }
}

// WithRetry sets how long Lock waits between attempts when no release notice wakes it first.
// Default: ExponentialBackoff(16ms, 1s), with release notices waking waiters at once. Each call
// counts its own retries (see RetryStrategy): its waits in the Client's local turn are backoffs
// too, and a notice's extra attempt spends none. TryLock ignores it.
func WithRetry(s RetryStrategy) Option {
	return func(c *config) {
		if err := validateRetry(s); err != nil {
			c.invalid(err)
			return
		}
		c.retry = s
	}
}

// WithOwner sets the owner identity explicitly. Every Lock with the same owner on the same key
// re-enters the same lock, from any goroutine, Client or process: use it only for deliberately
// shared ownership, since it gives up the protection of random owner tokens. The identity must be
// 1 to MaxOwnerLen bytes. Default: the ownership carried by the call's context for that key, or
// else a fresh 128-bit random token per Lock.
func WithOwner(id string) Option {
	return func(c *config) { c.setOwner(id, false) }
}

// setOwner sets the owner of WithOwner (held false) or WithHeldOwner (held true).
func (c *config) setOwner(id string, held bool) {
	if id == "" || len(id) > MaxOwnerLen {
		c.invalid(display.Errorf("%w: owner must be 1 to %d bytes, got %d", ErrInvalid, MaxOwnerLen, len(id)))
		return
	}
	c.owner, c.heldOwner = id, held
}

// WithHeldOwner re-enters a hold that the owner token already has on the key, taken by another
// Client or process (Lease.Owner gives the token; a nested "locker run" does this): Lock and
// TryLock add one hold, as a re-entry through the lease's context would, and never take a new
// lock: when that owner holds no lock on the key (it expired, was released or was forced away),
// they return an error wrapping ErrLockLost. Unlock of the new Lease releases only its own hold.
// The token must be 1 to MaxOwnerLen bytes. Default: none; the last of WithOwner and
// WithHeldOwner applies.
func WithHeldOwner(token string) Option {
	return func(c *config) { c.setOwner(token, true) }
}

// WithOwnerLabel puts a readable label in front of the random owner tokens this Client makes
// ("web-1/4242#" and 32 random hex digits), so that an operator sees who holds a lock:
// Inspect and "locker inspect" show the label and the first 8 digits, and the token stays as
// unguessable as without a label. Use a host name and process ID, a job name... The label must
// be 1 to MaxLabelLen bytes of valid UTF-8 without control characters. Default: no label.
func WithOwnerLabel(label string) Option {
	return func(c *config) {
		if err := CheckOwnerLabel(label); err != nil {
			c.invalid(err)
			return
		}
		c.label = label
	}
}

// CheckOwnerLabel reports whether WithOwnerLabel accepts label: nil, or an error wrapping
// ErrInvalid that says why. It lets a program check a label it was given (a flag, a setting)
// before it builds a Client.
func CheckOwnerLabel(label string) error {
	switch {
	case label == "" || len(label) > MaxLabelLen:
		return display.Errorf("%w: owner label must be 1 to %d bytes, got %d", ErrInvalid, MaxLabelLen, len(label))
	case !utf8.ValidString(label):
		return display.Errorf("%w: owner label is not valid UTF-8", ErrInvalid)
	case strings.ContainsFunc(label, unicode.IsControl):
		return display.Errorf("%w: owner label %q has a control character", ErrInvalid, label)
	}
	return nil
}

// WithKeyPrefix puts every key in a namespace: the backend sees prefix+key. Given per call it
// replaces the Client's prefix for that call. Default: no prefix.
func WithKeyPrefix(p string) Option {
	return func(c *config) { c.prefix = p }
}

// WithFencing makes Lock and TryLock ask the backend for a fencing token, read with Lease.Token.
// It costs no round trip; on a Redis backend it keeps one small counter key per lock key for ever
// ("KEY:locker:fence" and what puts it in the key's cluster slot: see docs/redis.md). Every Client
// locking a key should use it, or none: a lock taken without it does not advance the counter.
// Default: off, Token returns 0.
func WithFencing() Option {
	return func(c *config) { c.fence = true }
}

// WithUnlockTimeout bounds each Unlock of the leases it applies to: the release, with the
// attempts Unlock makes while the backend is unavailable, ends within d, whatever the driver's
// own timeouts and retries. An Unlock that runs out of time returns an error wrapping
// context.DeadlineExceeded; the hold then stays on the backend until its lease runs out (the
// watchdog no longer renews it). Default DefaultUnlockTimeout (5s); d must be positive.
func WithUnlockTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.invalid(display.Errorf("%w: WithUnlockTimeout(%v): must be positive", ErrInvalid, d))
			return
		}
		c.unlock = d
	}
}

// WithUnavailableTimeout bounds how long Lock and RLock keep trying while the backend is
// unavailable (connection refused or broken, a server restarting or failing over: an error
// wrapping ErrUnavailable), counted from the first attempt of a run of such failures; any answer
// of the backend ends the run. Past d, Lock returns an error that wraps ErrUnavailable and the
// backend's own error; a Client with a logger (WithLogger) logs when a run begins. d = 0 keeps
// trying for as long as ctx and the retry strategy allow: for a server expected back. TryLock
// returns the backend's error at once, whatever d. Default DefaultUnavailableTimeout (5s); d
// must not be negative.
func WithUnavailableTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid(display.Errorf("%w: WithUnavailableTimeout(%v): must not be negative", ErrInvalid, d))
			return
		}
		c.down = d
	}
}

// WithFair makes Lock and RLock fair: calls on a key that all use it obtain the lock in the order
// in which they first asked, across Clients and processes, through the key's wait queue on the
// backend (readers queued next to each other obtain it together). TryLock and TryRLock with it
// never jump the queue: while anyone waits, they are refused. A waiter whose ctx ends leaves the
// queue at once; one whose process dies blocks those behind it for at most its TTL, as a holder
// that dies does. Calls without it on the same key may obtain the lock before the queued ones
// of their own kind: a Lock before fair Locks, an RLock before fair RLocks (readers and writers
// still take turns: see RLock). It needs a backend that
// implements KindLocker (every backend of this module but backend/quorum); on another, Lock
// returns an error wrapping errors.ErrUnsupported. Default: off.
func WithFair() Option {
	return func(c *config) { c.fair = true }
}

// WithObserver makes the Client report its lock calls, unlocks, renewals, lost leases and force
// unlocks to o (see Observer). Given more than once, every Observer is called, in order. It
// applies to the Client (in New); given to a single call, it is ignored. Default: none.
func WithObserver(o Observer) Option {
	return func(c *config) { c.obs = c.obs.join(o, nil) }
}

// WithLogger makes the Client write log/slog records, at level Warn, of lost leases (the key,
// the owner as Lease.String shows it, without its secret part, the cause and the time held),
// of renewals that failed, of release-notice subscriptions that failed (once per Lock call
// that waits: it then waits on timers), and of a Lock that found the backend unavailable and
// tries again (once per run of failures; see WithUnavailableTimeout). Keys over 64 bytes are cut. A nil logger writes
// nothing. It applies to the Client (in New); given to a single call, it is ignored. Default: no
// records.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			return
		}
		c.obs = c.obs.join(logObserver(l), l)
	}
}
