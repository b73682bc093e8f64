package bench

import (
	"context"
)

// SemaphoreLimit is the number of permits of the semaphore scenarios' key.
const SemaphoreLimit = 4

// SemaphoreGoroutines is the number of goroutines of the semaphore scenarios when the Config
// does not set one: four per permit.
const SemaphoreGoroutines = 16

// A SemaphoreMutex is a Mutex of a library with counting semaphores: our Client on a backend
// that has them, or a peer's semaphore.
type SemaphoreMutex interface {
	Mutex
	// Acquire waits until it holds one of the n permits of key (or ctx ends) and returns the
	// hold.
	Acquire(ctx context.Context, key string, n int) (Held, error)
}

func (m *ourMutex) Acquire(ctx context.Context, key string, n int) (Held, error) {
	return held(m.c.Acquire(ctx, key, n))
}

// permitLock is SemaphoreMutex.Acquire of one of SemaphoreLimit permits; ErrNotApplicable for
// another Mutex.
func permitLock(m Mutex) (func(ctx context.Context, key string) (Held, error), error) {
	s, ok := m.(SemaphoreMutex)
	if !ok {
		return nil, ErrNotApplicable
	}
	return func(ctx context.Context, key string) (Held, error) { return s.Acquire(ctx, key, SemaphoreLimit) }, nil
}

// Semaphore measures cfg.Goroutines goroutines (default SemaphoreGoroutines) taking permits of
// one semaphore of SemaphoreLimit, each holding its permit for cfg.Hold before it gives it back:
// permits handed over per second, the wait of every Acquire from the call to the permit (p50,
// p99, max), and Busy, the share of the SemaphoreLimit slots that were held. A hold sleeps, as
// the batch work a semaphore bounds waits on I/O (4 holders busy on 2 cores would measure the
// scheduler). With shared, the goroutines share one client; else each has its own, as separate
// processes would.
func Semaphore(ctx context.Context, r Runner, lib Lib, cfg Config, shared bool) (Result, error) {
	name := "semaphore-separate"
	if shared {
		name = "semaphore-shared"
	}
	if cfg.Goroutines == 0 {
		cfg.Goroutines = SemaphoreGoroutines
	}
	res, err := contention(ctx, r, lib, cfg, shared, true, name, permitLock)
	res.Busy /= SemaphoreLimit
	return res, err
}
