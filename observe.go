package locker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// An Observer is told what a Client does with locks, for metrics, traces and logs (the otel
// module, github.com/hashlock/locker/otel, builds OpenTelemetry metrics and spans on it). Set
// it with WithObserver. Each field may be nil: that event is then not reported. Default: no
// Observer, and a Client without one does no work and no allocation for it.
//
// The funcs are called synchronously: Lock at the return of every Lock, TryLock, RLock and
// TryRLock call, Unlock at the return of every Unlock that releases a hold (not a second Unlock
// of the same Lease), Renew after every renewal round trip of the watchdog, and Lost when a
// Lease's hold is lost (once per Lease), just before its context ends with ErrLockLost (a fixed
// lease's context may have ended at its deadline already). Lost is called while the
// Client's internal lock is held: every func must be quick, safe for concurrent use, and must
// not call the Client or Unlock. ctx is the call's ctx for Lock, the Lease's context for Unlock
// and Lost (it carries the values of Lock's ctx: trace data), and context.Background for Renew.
// Events carry no owner token, but a Lease's Owner method returns it: do not record it.
type Observer struct {
	// Lock is called at the return of every Lock, TryLock, RLock and TryRLock. Default nil.
	Lock func(ctx context.Context, e LockEvent)
	// Unlock is called at the return of every Unlock that releases a hold. Default nil.
	Unlock func(ctx context.Context, e UnlockEvent)
	// Renew is called after every renewal round trip of the watchdog. Default nil.
	Renew func(ctx context.Context, e RenewEvent)
	// Lost is called once per lost Lease, before its context ends. Default nil.
	Lost func(ctx context.Context, e LostEvent)
}

// LockEvent reports one Lock, TryLock, RLock or TryRLock call, at its return.
type LockEvent struct {
	// Key is the key as the caller passed it, without the key prefix. It may be long and have
	// many values: do not use it as a metric attribute as it is.
	Key string
	// Shared reports RLock or TryRLock; Try, TryLock or TryRLock (a call that does not wait).
	Shared, Try bool
	// Outcome says how the call ended.
	Outcome Outcome
	// Wait is the time from the call to its return, the backend's round trips included.
	Wait time.Duration
	// Lease is the lease obtained (Outcome Acquired or Reentered), nil otherwise.
	Lease *Lease
	// Err is the call's error (nil when a Lease was obtained).
	Err error
}

// Outcome is how a lock call ended (LockEvent.Outcome).
type Outcome uint8

const (
	// Acquired: a new lock (hold count 1).
	Acquired Outcome = iota + 1
	// Reentered: one more hold on a lock the owner held (hold count 2 or more).
	Reentered
	// NotObtained: another owner held the lock and the call gave up without its ctx ending:
	// TryLock's attempt was refused, or Lock's retry strategy ran out (ErrNotObtained).
	NotObtained
	// Canceled: the call's ctx ended, or the Client was closed, before the lock was obtained.
	Canceled
	// Failed: any other error (the backend failed or was unavailable, an invalid argument, a
	// re-entry into a lost hold, an upgrade).
	Failed
)

// String returns the outcome's name: "acquired", "reentered", "not_obtained", "canceled" or
// "error".
func (o Outcome) String() string {
	switch o {
	case Acquired:
		return "acquired"
	case Reentered:
		return "reentered"
	case NotObtained:
		return "not_obtained"
	case Canceled:
		return "canceled"
	case Failed:
		return "error"
	}
	return "unknown"
}

// UnlockEvent reports one Unlock that released (or tried to release) a hold.
type UnlockEvent struct {
	// Lease is the lease unlocked.
	Lease *Lease
	// Held is the time from the lease's grant to the end of its release (Unlock's return): the
	// time the backend held it for this lease.
	Held time.Duration
	// Lost reports that Observer.Lost was called for this lease before (its Unlock then
	// usually fails with ErrNotHeld): a count of held leases already counted it out.
	Lost bool
	// Err is Unlock's error, nil when the hold was released.
	Err error
}

// RenewEvent reports one renewal round trip of the watchdog (one Locker.Renew call, which renews
// every hold of the Client that is due).
type RenewEvent struct {
	// Holds is the number of (key, owner) holds in the batch; Renewed, Gone and Failed count
	// them by outcome: renewed, no longer held (their leases are lost: see Observer.Lost), and
	// unknown (the call failed: the watchdog tries again soon).
	Holds, Renewed, Gone, Failed int
	// Duration is the round trip's time.
	Duration time.Duration
	// Err is the error of one failed hold (nil when none failed).
	Err error
}

// LostEvent reports a lease whose context ended with ErrLockLost.
type LostEvent struct {
	// Lease is the lease lost.
	Lease *Lease
	// Cause says how the loss was seen.
	Cause LostCause
	// Held is the time from the lease's grant to its loss.
	Held time.Duration
}

// LostCause says how a Client saw a lease lost (LostEvent.Cause).
type LostCause uint8

const (
	// LostExpired: the lease may have run out on the backend by the local clock, renewals
	// having failed (or a lease WithoutRenewal reached its end).
	LostExpired LostCause = iota + 1
	// LostGone: the backend showed the hold gone (a renewal or a re-entry found it expired,
	// forced away or taken by another owner).
	LostGone
	// LostForced: this Client's ForceUnlock deleted the lock.
	LostForced
)

// String returns the cause's name: "expired", "gone" or "forced".
func (c LostCause) String() string {
	switch c {
	case LostExpired:
		return "expired"
	case LostGone:
		return "gone"
	case LostForced:
		return "forced"
	}
	return "unknown"
}

// WithObserver makes the Client report its lock calls, unlocks, renewals and lost leases to o
// (see Observer). Given more than once, every Observer is called, in order. It applies to the
// Client (in New); given to a single call, it is ignored. Default: none.
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
		c.obs = c.obs.join(Observer{
			Lost: func(ctx context.Context, e LostEvent) {
				l.LogAttrs(ctx, slog.LevelWarn, "locker: lease lost",
					slog.String("key", logKey(e.Lease.Key())), slog.String("owner", display.Owner(e.Lease.Owner())),
					slog.Bool("shared", e.Lease.Shared()), slog.String("cause", e.Cause.String()), slog.Duration("held", e.Held))
			},
			Renew: func(ctx context.Context, e RenewEvent) {
				if e.Failed == 0 {
					return
				}
				l.LogAttrs(ctx, slog.LevelWarn, "locker: renewal failed",
					slog.Int("holds", e.Holds), slog.Int("failed", e.Failed), slog.Duration("duration", e.Duration), slog.Any("error", e.Err))
			},
		}, l)
	}
}

// observers is what WithObserver and WithLogger set: the Observers, joined, and the logger. A
// config holds it by pointer (a Lock call copies its config: one word, nil when unused); it is
// never changed once made.
type observers struct {
	Observer
	log *slog.Logger // WithLogger; nil: none
}

// join returns observers that call o's funcs, then p's, with log when not nil (else o's); o may
// be nil.
func (o *observers) join(p Observer, log *slog.Logger) *observers {
	if o == nil {
		return &observers{Observer: p, log: log}
	}
	if log == nil {
		log = o.log
	}
	return &observers{Observer: Observer{
		Lock:   both(o.Lock, p.Lock),
		Unlock: both(o.Unlock, p.Unlock),
		Renew:  both(o.Renew, p.Renew),
		Lost:   both(o.Lost, p.Lost),
	}, log: log}
}

func both[E any](f, g func(context.Context, E)) func(context.Context, E) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, e E) { f(ctx, e); g(ctx, e) }
}

// obtainObserved is obtain, reported to the Client's Observer when it has one.
func (c *Client) obtainObserved(ctx context.Context, key string, opts []Option, wait, shared bool) (*Lease, error) {
	o := c.cfg.obs
	if o == nil || o.Lock == nil {
		return c.obtain(ctx, key, opts, wait, shared)
	}
	start := time.Now()
	l, err := c.obtain(ctx, key, opts, wait, shared)
	e := LockEvent{Key: key, Shared: shared, Try: !wait, Wait: time.Since(start), Lease: l, Err: err}
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
	if ctx == nil {
		ctx = context.Background()
	}
	o.Lock(ctx, e)
	return l, err
}

// epoch is the origin of sinceEpoch.
var epoch = time.Now()

// sinceEpoch returns the time since epoch, by the monotonic clock: a Lease keeps its grant time
// so, in 8 bytes rather than a time.Time's 24.
func sinceEpoch() time.Duration { return time.Since(epoch) }

// refusedOnly reports whether err is a refusal (a *NotObtainedError) without a ctx error.
func refusedOnly(err error) bool {
	var refused *NotObtainedError
	return errors.As(err, &refused) && refused.Err == nil
}

// observeUnlock reports l's Unlock, which returns err.
func (l *Lease) observeUnlock(o *observers, err error) {
	if o.Unlock != nil {
		o.Unlock(l.Context(), UnlockEvent{Lease: l, Held: sinceEpoch() - l.granted, Lost: l.lost, Err: err})
	}
}

// lose reports the loss of the lease (once) to the Observer, then ends its context with
// ErrLockLost: whoever wakes at its end finds the loss reported. Client.mu is held.
func (l *Lease) lose(why LostCause) {
	if !l.lost {
		l.lost = true
		if o := l.client.cfg.obs; o != nil && o.Lost != nil {
			o.Lost(l.Context(), LostEvent{Lease: l, Cause: why, Held: sinceEpoch() - l.granted})
		}
	}
	l.end(ErrLockLost)
}

// lose ends every lease of the hold with ErrLockLost, reporting why.
func (h *hold) lose(why LostCause) {
	for _, l := range h.leases {
		l.lose(why)
	}
}

// observeRenew reports a renewal round trip of batch that took d and returned errs.
func (c *Client) observeRenew(o *observers, batch []Renewal, errs []error, d time.Duration) {
	e := RenewEvent{Holds: len(batch), Duration: d}
	for i := range batch {
		switch err := renewalErr(errs, len(batch), i); {
		case err == nil:
			e.Renewed++
		case errors.Is(err, ErrNotHeld):
			e.Gone++
		default:
			e.Failed++
			if e.Err == nil {
				e.Err = err
			}
		}
	}
	o.Renew(context.Background(), e)
}

// logSubscribe writes the record of a release-notice subscription on key that failed with err,
// when the Client has a logger and the failure is worth one.
func (c *Client) logSubscribe(ctx context.Context, key string, err error) {
	if c.cfg.obs == nil || c.cfg.obs.log == nil || ctx.Err() != nil || errors.Is(err, errors.ErrUnsupported) {
		return
	}
	c.cfg.obs.log.LogAttrs(ctx, slog.LevelWarn, "locker: release notices unavailable, waiting on timers",
		slog.String("key", logKey(key)), slog.Any("error", err))
}

// logUnavailable logs, when the Client has a logger, that a Lock found the backend unavailable
// and tries again for up to bound (0: while its ctx and retry strategy allow).
func (c *Client) logUnavailable(ctx context.Context, key string, bound time.Duration, err error) {
	if c.cfg.obs == nil || c.cfg.obs.log == nil {
		return
	}
	until := slog.Duration("for", bound)
	if bound == 0 {
		until = slog.String("for", "as long as ctx and the retry strategy allow")
	}
	c.cfg.obs.log.LogAttrs(ctx, slog.LevelWarn, "locker: backend unavailable, trying again",
		slog.String("key", logKey(key)), until, slog.Any("error", err))
}

// logKey returns key for a log record, cut as display.Key cuts it when it is long.
func logKey(key string) string {
	if len(key) <= display.MaxKey {
		return key
	}
	return display.Key(key)
}
