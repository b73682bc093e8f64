package locker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// errRefused stands for a driver's own error: what the Lock's error must carry.
var errRefused = errors.New("dial tcp 127.0.0.1:6391: connect: connection refused")

// downBackend is a memory backend that is unreachable while down is set: every call fails at
// once with an error wrapping ErrUnavailable and errRefused, without reaching the backend.
type downBackend struct {
	*memory.Backend
	mu   sync.Mutex
	down bool
	n    int // acquires tried while down
}

func (b *downBackend) set(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
}

func (b *downBackend) isDown() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down
}

// tried returns how many acquires were tried while down. A Lock that gave up sends its take-back
// in the background, which may still run: b.mu guards n.
func (b *downBackend) tried() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *downBackend) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	b.mu.Lock()
	if b.down {
		b.n++
	}
	b.mu.Unlock()
	if b.isDown() {
		return locker.Acquisition{}, errors.Join(locker.ErrUnavailable, errRefused)
	}
	return b.Backend.Acquire(ctx, req)
}

func (b *downBackend) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if b.isDown() {
		return 0, errors.Join(locker.ErrUnavailable, errRefused)
	}
	return b.Backend.Release(ctx, req)
}

// wantDown fails the test unless err says that the backend was unavailable (ErrUnavailable and
// the driver's own error), and never that another owner holds the key.
func wantDown(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, errRefused) || errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("%s = %v, want ErrUnavailable with the driver's error, and not ErrNotObtained", what, err)
	}
	if strings.Contains(err.Error(), "not obtained") || strings.Contains(err.Error(), "held by another owner") {
		t.Fatalf("%s = %v: it reads as contention", what, err)
	}
}

// A Lock on a backend that cannot be reached gives up after the default bound of 5s with the
// backend's error, not a refusal; with a shorter WithUnavailableTimeout, after that. It tries
// again meanwhile, at most 200ms apart. TryLock returns the error at once.
func TestLockGivesUpWhileUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &downBackend{Backend: memory.New(), down: true}
		c := locker.New(b)
		defer c.Close()

		start := time.Now()
		_, err := c.Lock(context.Background(), "k")
		if took := time.Since(start); took != locker.DefaultUnavailableTimeout {
			t.Fatalf("Lock on an unreachable backend returned after %v, want %v", took, locker.DefaultUnavailableTimeout)
		}
		wantDown(t, "Lock", err)
		if !strings.Contains(err.Error(), "gave up after 5s") {
			t.Fatalf("Lock = %v: want it to say how long it tried", err)
		}
		if n := b.tried(); n < 25 {
			t.Fatalf("Lock tried %d times in 5s, want every 200ms at least", n)
		}

		start = time.Now()
		_, err = c.RLock(context.Background(), "k", locker.WithUnavailableTimeout(time.Second))
		if took := time.Since(start); took != time.Second {
			t.Fatalf("RLock with WithUnavailableTimeout(1s) returned after %v", took)
		}
		wantDown(t, "RLock", err)

		start = time.Now()
		_, err = c.TryLock(context.Background(), "k")
		if time.Since(start) != 0 {
			t.Fatal("TryLock on an unreachable backend waited")
		}
		wantDown(t, "TryLock", err)
	})
}

// When Lock's ctx ends while the backend is unreachable, the error wraps ctx's error, the
// backend's, and ErrUnavailable, and not ErrNotObtained.
func TestLockUntilCtxWhileUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := locker.New(&downBackend{Backend: memory.New(), down: true})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Lock(ctx, "k")
		wantDown(t, "Lock", err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock = %v, want it to wrap its ctx's error", err)
		}
	})
}

// With WithUnavailableTimeout(0) Lock waits for the backend to come back, within its ctx, and
// gets the lock then; a Client with a logger logs once that it tries again.
func TestLockWaitsForTheBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged bytes.Buffer
		b := &downBackend{Backend: memory.New(), down: true}
		c := locker.New(b, locker.WithUnavailableTimeout(0), locker.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		defer c.Close()
		go func() {
			time.Sleep(time.Minute)
			b.set(false)
		}()
		start := time.Now()
		l, err := c.Lock(context.Background(), "k")
		if err != nil {
			t.Fatalf("Lock once the backend is back = %v", err)
		}
		if took := time.Since(start); took < time.Minute || took > time.Minute+200*time.Millisecond {
			t.Fatalf("Lock took %v, want the backend's minute down and at most 200ms more", took)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(logged.String(), "msg=\"locker: backend unavailable"); n != 1 || !strings.Contains(logged.String(), "connection refused") {
			t.Fatalf("the log has %d records of the backend unavailable, want one with the driver's error:\n%s", n, logged.String())
		}
	})
}

// An answer of the backend ends a run of failures: a Lock that meets two outages of 3s, with
// a refusal between them, does not give up after 5s counted across both.
func TestUnavailableRunsEndWithAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &downBackend{Backend: memory.New()}
		holder, c := locker.New(b), locker.New(b, locker.WithRetry(locker.LinearBackoff(100*time.Millisecond)))
		defer holder.Close()
		defer c.Close()
		held, err := holder.Lock(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		b.set(true)
		go func() {
			time.Sleep(3 * time.Second) // the first outage
			b.set(false)
			time.Sleep(time.Second) // answers: the key is held
			b.set(true)
			time.Sleep(3 * time.Second) // the second outage
			b.set(false)
			_ = held.Unlock()
		}()
		start := time.Now()
		l, err := c.Lock(context.Background(), "k")
		if err != nil {
			t.Fatalf("Lock through two outages of 3s = %v, want the key", err)
		}
		if took := time.Since(start); took < 7*time.Second {
			t.Fatalf("Lock got the key after %v, before the holder unlocked", took)
		}
		_ = l.Unlock()
	})
}

// WithUnavailableTimeout refuses a negative bound.
func TestUnavailableTimeoutInvalid(t *testing.T) {
	c := locker.New(memory.New())
	defer c.Close()
	if _, err := c.Lock(context.Background(), "k", locker.WithUnavailableTimeout(-time.Second)); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("Lock with WithUnavailableTimeout(-1s) = %v, want ErrInvalid", err)
	}
}
