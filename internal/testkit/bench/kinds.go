package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashlock/locker"
)

// A KindMutex is a Mutex with shared holds and fair locks: our Client on a backend that has
// them. The peers have neither, and the scenarios that need them do not apply to them.
type KindMutex interface {
	Mutex
	// RLock waits until it holds key shared (or ctx ends) and returns the hold.
	RLock(ctx context.Context, key string) (Held, error)
	// FairLock is Lock in the key's wait queue: first come, first served.
	FairLock(ctx context.Context, key string) (Held, error)
}

// fair is the option of FairLock, made once.
var fair = []locker.Option{locker.WithFair()}

func (m *ourMutex) RLock(ctx context.Context, key string) (Held, error) {
	return held(m.c.RLock(ctx, key))
}

func (m *ourMutex) FairLock(ctx context.Context, key string) (Held, error) {
	return held(m.c.Lock(ctx, key, fair...))
}

// held returns l as a Held (never a nil *Lease in a non-nil Held), and ErrNotApplicable for a
// backend without shared holds or queues (the quorum).
func held(l *locker.Lease, err error) (Held, error) {
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, fmt.Errorf("%w: %w", ErrNotApplicable, err)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// readLock is KindMutex.RLock; ErrNotApplicable for another Mutex.
func readLock(m Mutex) (func(ctx context.Context, key string) (Held, error), error) {
	if km, ok := m.(KindMutex); ok {
		return km.RLock, nil
	}
	return nil, ErrNotApplicable
}

// fairLock is KindMutex.FairLock; ErrNotApplicable for another Mutex.
func fairLock(m Mutex) (func(ctx context.Context, key string) (Held, error), error) {
	if km, ok := m.(KindMutex); ok {
		return km.FairLock, nil
	}
	return nil, ErrNotApplicable
}

// openKinds opens one client of lib per goroutine of cfg (plus one writer, with writer), and
// the lock function lockOf gives for each (the writer's: Lock). It warms them up on key.
func openKinds(ctx context.Context, lib Lib, cfg Config, key string, writer bool, lockOf lockFunc) ([]Mutex, []func(ctx context.Context, key string) (Held, error), func(), error) {
	n := cfg.Goroutines
	if writer {
		n++
	}
	ms := make([]Mutex, 0, n)
	locks := make([]func(ctx context.Context, key string) (Held, error), 0, n)
	var closes []func()
	closeAll := func() {
		for _, c := range closes {
			c()
		}
	}
	for g := range n {
		m, done, err := lib.Open()
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		closes = append(closes, done)
		lock := m.Lock
		if !writer || g < n-1 {
			if lock, err = lockOf(m); err != nil {
				closeAll()
				return nil, nil, nil, err
			}
		}
		if err := lockUnlockWith(ctx, lock, key, warmOps); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		ms, locks = append(ms, m), append(locks, lock)
	}
	return ms, locks, closeAll, nil
}

// Readers measures cfg.Goroutines readers, a Client each, taking shared holds of one key for
// cfg.Hold each, then, as its baseline, the same Clients taking exclusive holds of another key
// (N/4 of them): reader acquisitions per second, and their ratio to the writers' (Speedup).
// Both hold by sleeping, as work that waits on I/O does: busy holds would measure the machine's
// cores, not the lock.
func Readers(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	key := newKey("readers")
	ms, locks, done, err := openKinds(ctx, lib, cfg, key, false, readLock)
	if err != nil {
		return Result{}, err
	}
	defer done()
	writers := make([]func(ctx context.Context, key string) (Held, error), len(ms))
	for g, m := range ms {
		writers[g] = m.Lock
	}
	wkey := newKey("readers-baseline")
	if err := lockUnlockWith(ctx, writers[0], wkey, warmOps); err != nil {
		return Result{}, err
	}
	res, t, err := measureTurns(ctx, r, lib, "readers", ms, locks, key, cfg.Hold, true)
	if err != nil {
		return Result{}, err
	}
	base, err := turns(ctx, writers, wkey, max(res.N/4, len(ms)), cfg.Hold, true)
	if err != nil {
		return Result{}, err
	}
	res.Goroutines = cfg.Goroutines
	res.Fairness = Fairness(t.counts)
	res.Speedup = res.HandoffsPerSec / (float64(len(base.waits)) / base.elapsed.Seconds())
	return res, nil
}

// FairContention is contention-separate with every Lock fair (locker.WithFair): the goroutines
// obtain the key in the order they asked, through the key's queue on the server.
func FairContention(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	return contention(ctx, r, lib, cfg, false, false, "contention-fair", fairLock)
}

// ReadersWriter measures cfg.Goroutines readers and one writer on one key, a Client each,
// every hold cfg.Hold (sleeping, as in Readers), until N acquisitions in all: acquisitions per
// second, the waits of all, and the writer's acquisitions (a writer that readers starve gets
// almost none).
func ReadersWriter(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	key := newKey("readers-writer")
	ms, locks, done, err := openKinds(ctx, lib, cfg, key, true, readLock)
	if err != nil {
		return Result{}, err
	}
	defer done()
	res, t, err := measureTurns(ctx, r, lib, "readers-writer", ms, locks, key, cfg.Hold, true)
	if err != nil {
		return Result{}, err
	}
	res.Goroutines = len(ms)
	res.Writes = t.counts[len(ms)-1]
	return res, nil
}
