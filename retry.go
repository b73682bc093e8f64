package locker

import (
	"math/rand/v2"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// RetryStrategy decides how long Lock waits after a refused attempt before it tries again, when
// no release notice wakes it first. Lock also wakes when the holder's remaining lease runs out,
// whichever comes first.
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
// try only. Every retry counts, whether a timer or a release notice woke it. Requires
// attempts >= 0 and a non-nil s.
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
