package locker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

func TestExponentialBackoffBounds(t *testing.T) {
	const lo, hi = 10 * time.Millisecond, 80 * time.Millisecond
	s := locker.ExponentialBackoff(lo, hi)
	for retry := range 100 {
		step := min(lo<<min(retry, 10), hi)
		for range 50 {
			d, ok := s.Backoff(retry)
			if !ok {
				t.Fatalf("retry %d: ExponentialBackoff gave up", retry)
			}
			if d < lo || d < step/2 || d > step {
				t.Fatalf("retry %d: wait %v, want within [max(%v, %v), %v]", retry, d, lo, step/2, step)
			}
		}
	}
}

func TestExponentialBackoffJitters(t *testing.T) {
	s := locker.ExponentialBackoff(time.Millisecond, time.Second)
	seen := map[time.Duration]bool{}
	for range 100 {
		d, _ := s.Backoff(8)
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("100 waits took only %d distinct values: no jitter", len(seen))
	}
}

func TestLinearAndNoRetry(t *testing.T) {
	for retry := range 5 {
		if d, ok := locker.LinearBackoff(7 * time.Millisecond).Backoff(retry); !ok || d != 7*time.Millisecond {
			t.Fatalf("LinearBackoff retry %d = %v, %v", retry, d, ok)
		}
		if _, ok := locker.NoRetry().Backoff(retry); ok {
			t.Fatal("NoRetry retried")
		}
	}
}

func TestLimitRetry(t *testing.T) {
	s := locker.LimitRetry(locker.LinearBackoff(time.Millisecond), 3)
	for retry := range 6 {
		_, ok := s.Backoff(retry)
		if ok != (retry < 3) {
			t.Fatalf("LimitRetry(_, 3) retry %d: ok = %v", retry, ok)
		}
	}
	// Stateless: the same strategy serves a second Lock afresh.
	if _, ok := s.Backoff(0); !ok {
		t.Fatal("LimitRetry kept state between calls")
	}
}

func TestNotObtainedError(t *testing.T) {
	plain := &locker.NotObtainedError{Key: "k", TTL: time.Second}
	if !errors.Is(plain, locker.ErrNotObtained) || errors.Is(plain, locker.ErrInvalid) {
		t.Fatal("NotObtainedError must wrap ErrNotObtained only")
	}
	waited := &locker.NotObtainedError{Key: "k", Err: errDeadline}
	if !errors.Is(waited, locker.ErrNotObtained) || !errors.Is(waited, errDeadline) {
		t.Fatal("NotObtainedError with Err must wrap both")
	}
	if plain.Error() == "" || waited.Error() == plain.Error() {
		t.Fatal("the messages must differ")
	}
}

var errDeadline = errors.New("deadline")
