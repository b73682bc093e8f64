package locker

import (
	"math/rand/v2"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// RetryStrategy decides how long Lock waits after a refused attempt before it tries again, when
// no release notice (or the end of the holder's lease) wakes it first. Each Lock call runs
// through it on its own: a retry is a backoff that ran to its end, whether the call waited for
// the backend or in its Client's local turn (where the call in front tries for it); a notice,
// another call's give-up or the turn coming brings an extra attempt that spends no retry and
// starts no new backoff.
//
// A RetryStrategy is a pure function of the retry number: it must hold no state shared between
// calls, so one strategy can serve any number of concurrent Locks, each starting afresh.
type RetryStrategy interface {
	// Backoff returns the wait before retry number retry (0 for the first retry after the
	// first attempt), and ok == false when Lock should give up instead. A negative wait counts
	// as zero.
	Backoff(retry int) (wait time.Duration, ok bool)
}

// validator is implemented by this package's strategies so that WithRetry can reject bad
// arguments with ErrInvalid instead of panicking or spinning.
type validator interface{ validate() error }

// NoRetry gives up after the first refused attempt: Lock with NoRetry behaves like TryLock.
func NoRetry() RetryStrategy { return noRetry{} }

type noRetry struct{}

func (noRetry) Backoff(int) (time.Duration, bool) { return 0, false }

// LinearBackoff waits d between attempts, for ever (bound it with Lock's ctx or LimitRetry).
// d must be positive.
func LinearBackoff(d time.Duration) RetryStrategy { return linearBackoff{d} }

type linearBackoff struct{ d time.Duration }

func (s linearBackoff) Backoff(int) (time.Duration, bool) { return s.d, true }

func (s linearBackoff) validate() error {
	if s.d <= 0 {
		return display.Errorf("%w: LinearBackoff(%v): the wait must be positive", ErrInvalid, s.d)
	}
	return nil
}

// ExponentialBackoff doubles the wait after each retry from min up to max, with jitter: each
// wait is drawn at random between half and all of the current step, and never below min. It
// retries for ever (bound it with Lock's ctx or LimitRetry). Requires 0 < min <= max.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return exponentialBackoff{min: min, max: max}
}

type exponentialBackoff struct{ min, max time.Duration }

func (s exponentialBackoff) Backoff(retry int) (time.Duration, bool) {
	step := s.max
	if retry < 62 && s.min<<retry > 0 && s.min<<retry < s.max {
		step = s.min << retry
	}
	wait := step/2 + rand.N(step/2+1)
	return max(wait, s.min), true
}

func (s exponentialBackoff) validate() error {
	if s.min <= 0 || s.max < s.min {
		return display.Errorf("%w: ExponentialBackoff(%v, %v): want 0 < min <= max", ErrInvalid, s.min, s.max)
	}
	return nil
}

// LimitRetry allows at most attempts retries of s after the first try; attempts == 0 makes one
// try only. Lock gives up once attempts backoffs of s have run one after the other (the sum of
// them, plus its attempts' round trips), however often notices woke it in between and however
// many calls share the strategy or the Client. Requires attempts >= 0 and a non-nil s.
func LimitRetry(s RetryStrategy, attempts int) RetryStrategy {
	return limitRetry{s: s, attempts: attempts}
}

type limitRetry struct {
	s        RetryStrategy
	attempts int
}

func (l limitRetry) Backoff(retry int) (time.Duration, bool) {
	if retry >= l.attempts {
		return 0, false
	}
	return l.s.Backoff(retry)
}

func (l limitRetry) validate() error {
	if l.attempts < 0 {
		return display.Errorf("%w: LimitRetry(_, %d): attempts must be >= 0", ErrInvalid, l.attempts)
	}
	return validateRetry(l.s)
}

// validateRetry rejects a nil strategy and invalid arguments of this package's strategies.
func validateRetry(s RetryStrategy) error {
	if s == nil {
		return display.Errorf("%w: nil RetryStrategy", ErrInvalid)
	}
	if v, ok := s.(validator); ok {
		return v.validate()
	}
	return nil
}

// backoffs is one Lock call's own run through its retry strategy, from its first refusal (or
// its first wait in its Client's local turn): retry number spent is due at due, when the
// backoff that Backoff(spent) started ends. Only a backoff that runs to its end is a retry. An
// earlier wake-up (a notice, a grant to another, the turn's token, the holder's lease or the
// queue entry's refresh, the backend coming back) brings an attempt of the call's own, or none,
// and leaves due where it is: so LimitRetry(s, n) gives up once n backoffs have run, one after
// the other, whatever other calls of the same or other Clients do.
type backoffs struct {
	spent int       // retries spent: backoffs that ran to their end
	due   time.Time // the end of the backoff under way; zero when none is
}

// next returns the end of the backoff under way, starting the next one of s now if none is;
// ok == false when s gives up instead.
func (b *backoffs) next(s RetryStrategy) (due time.Time, ok bool) {
	if b.due.IsZero() {
		wait, ok := s.Backoff(b.spent)
		if !ok {
			return time.Time{}, false
		}
		b.due = time.Now().Add(max(wait, 0))
	}
	return b.due, true
}

// woke records a wake-up of the call: when the backoff under way has ended, it is one retry spent.
func (b *backoffs) woke() {
	if !b.due.IsZero() && !time.Now().Before(b.due) {
		b.spent++
		b.due = time.Time{}
	}
}
