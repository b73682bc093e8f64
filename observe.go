package locker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// An Observer is told what a Client does with locks, for metrics, traces and logs (the otel
// module, github.com/hashlock/locker/otel, builds OpenTelemetry metrics and spans on it). Set it
// with WithObserver; each field may be nil. Default: none, and a Client without one does no work
// and no allocation for it. The funcs are called synchronously, each at the event its field's
// doc names; Lost while the Client's internal lock is held. So every func must be quick, safe for
// concurrent use, and must not call the Client or Unlock. ctx is what Start returned for Lock;
// for Unlock and Lost, the values of the Lease's context (Lock's ctx's: trace data), never
// ending; ForceUnlock's ctx for ForceUnlock; context.Background for Renew. Events carry no owner
// token, but Lease.Owner returns it: do not record it.
type Observer struct {
	// Start is called when a Lock, TryLock, RLock, TryRLock, Acquire or TryAcquire call starts. The ctx it returns
	// (one derived from ctx; nil: ctx, at no cost) is the call's from then on: the backend's
	// calls and Lock get it, so a span started here parents the backend's spans. The Lease's
	// context keeps the values of the caller's ctx, not of Start's. Default nil.
	Start func(ctx context.Context, e StartEvent) context.Context
	// Lock is called at the return of every Lock, TryLock, RLock, TryRLock, Acquire and
	// TryAcquire. Default nil.
	Lock func(ctx context.Context, e LockEvent)
	// Unlock is called at the return of every Unlock that releases a hold (not a second Unlock
	// of the same Lease). Default nil.
	Unlock func(ctx context.Context, e UnlockEvent)
	// Renew is called after every renewal round trip of the watchdog. Default nil.
	Renew func(ctx context.Context, e RenewEvent)
	// Lost is called once per lost Lease, just before its context ends with ErrLockLost (a fixed
	// lease's may have ended at its deadline already), with the Client's lock held. Default nil.
	Lost func(ctx context.Context, e LostEvent)
	// ForceUnlock is called at the return of every ForceUnlock, after the Lost of the leases of
	// this Client it ended. Default nil.
	ForceUnlock func(ctx context.Context, e ForceUnlockEvent)
}

// StartEvent reports the start of a Lock, TryLock, RLock, TryRLock, Acquire or TryAcquire call
// (see Observer.Start).
type StartEvent struct {
	// Key is the key as the caller passed it, without the key prefix (see LockEvent.Key).
	Key string
	// Shared reports RLock or TryRLock; Try, TryLock, TryRLock or TryAcquire (a call that does
	// not wait).
	Shared, Try bool
	// Limit is the semaphore's number of permits for Acquire and TryAcquire; 0 for a lock.
	Limit int
}

// LockEvent reports one Lock, TryLock, RLock, TryRLock, Acquire or TryAcquire call, at its
// return.
type LockEvent struct {
	// Key is the key as the caller passed it, without the key prefix. It may be long and have
	// many values: do not use it as a metric attribute as it is.
	Key string
	// Shared reports RLock or TryRLock; Try, TryLock, TryRLock or TryAcquire (a call that does
	// not wait).
	Shared, Try bool
	// Limit is the semaphore's number of permits for Acquire and TryAcquire; 0 for a lock.
	Limit int
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
	// Duration is the time of the Unlock call, from its call to its return.
	Duration time.Duration
	// Err is Unlock's error, nil when the hold was released.
	Err error
}

// ForceUnlockEvent reports one ForceUnlock call, at its return.
type ForceUnlockEvent struct {
	// Key is the key as the caller passed it, without the key prefix (see LockEvent.Key).
	Key string
	// Removed reports that there was a lock to delete (ForceUnlock's bool).
	Removed bool
	// Duration is the time from the call to its return.
	Duration time.Duration
	// Err is the call's error.
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
		Start:       chain(o.Start, p.Start),
		Lock:        both(o.Lock, p.Lock),
		Unlock:      both(o.Unlock, p.Unlock),
		Renew:       both(o.Renew, p.Renew),
		Lost:        both(o.Lost, p.Lost),
		ForceUnlock: both(o.ForceUnlock, p.ForceUnlock),
	}, log: log}
}

// chain is both for Start: g gets the ctx f returned.
func chain(f, g func(context.Context, StartEvent) context.Context) func(context.Context, StartEvent) context.Context {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, e StartEvent) context.Context {
		c := f(ctx, e)
		if c != nil {
			ctx = c
		}
		if d := g(ctx, e); d != nil {
			return d
		}
		return c
	}
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

// started calls Start, when there is one, for a lock call with ctx (nil: Background for the
// Observer; the call still gets nil, which it reports). It returns the ctx for the call and the
// ctx for Lock: Start's, and ctx without Start.
func (o *observers) started(ctx context.Context, e StartEvent) (call, lock context.Context) {
	lock = ctx
	if lock == nil {
		lock = context.Background()
	}
	if o.Start == nil {
		return ctx, lock
	}
	s := o.Start(lock, e)
	switch {
	case s == nil:
		return ctx, lock
	case ctx == nil:
		return nil, s
	}
	return &startedCtx{Context: s, caller: ctx}, s
}

// startedCtx is the ctx of a lock call after Observer.Start: Start's ctx, which also gives back
// the caller's ctx, whose values the Lease's context keeps (not a span Start made, which ends
// with the call).
type startedCtx struct {
	context.Context
	caller context.Context
}

// startedKey is the context key under which a startedCtx gives itself.
type startedKey struct{}

func (s *startedCtx) Value(key any) any {
	if _, ok := key.(startedKey); ok {
		return s
	}
	return s.Context.Value(key)
}

// callerCtx returns the ctx that a lock call whose ctx is ctx was given: ctx without what
// Observer.Start added.
func (o *observers) callerCtx(ctx context.Context) context.Context {
	if o.Start == nil {
		return ctx
	}
	if s, ok := ctx.Value(startedKey{}).(*startedCtx); ok {
		return s.caller
	}
	return ctx
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

// logSubscribe writes the record of a release-notice subscription on key that failed with err,
// when there is a logger and the failure is worth one. o may be nil.
func (o *observers) logSubscribe(ctx context.Context, key string, err error) {
	if o == nil || o.log == nil || ctx.Err() != nil || errors.Is(err, errors.ErrUnsupported) {
		return
	}
	o.log.LogAttrs(ctx, slog.LevelWarn, "locker: release notices unavailable, waiting on timers",
		slog.String("key", logKey(key)), slog.Any("error", err))
}

// logUnavailable logs, when there is a logger, that a Lock found the backend unavailable and
// tries again for up to bound (0: while its ctx and retry strategy allow). o may be nil.
func (o *observers) logUnavailable(ctx context.Context, key string, bound time.Duration, err error) {
	if o == nil || o.log == nil {
		return
	}
	until := slog.Duration("for", bound)
	if bound == 0 {
		until = slog.String("for", "as long as ctx and the retry strategy allow")
	}
	o.log.LogAttrs(ctx, slog.LevelWarn, "locker: backend unavailable, trying again",
		slog.String("key", logKey(key)), until, slog.Any("error", err))
}

// logKey returns key for a log record, cut as display.Key cuts it when it is long.
func logKey(key string) string {
	if len(key) <= display.MaxKey {
		return key
	}
	return display.Key(key)
}

// logObserver is the Observer that WithLogger adds: it logs lost leases and failed renewals to l.
func logObserver(l *slog.Logger) Observer {
	return Observer{
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
	}
}
