package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

// Readers measures cfg.Goroutines readers, a Client each, taking shared holds of one key for
// cfg.Hold (busy) each: acquisitions per second, to set against contention-separate's writers
// with the same hold (readers share the key, so they should scale with the goroutines).
func Readers(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	return contention(ctx, r, lib, cfg, false, "readers", readLock)
}

// FairContention is contention-separate with every Lock fair (locker.WithFair): the goroutines
// obtain the key in the order they asked, through the key's queue on the server.
func FairContention(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	return contention(ctx, r, lib, cfg, false, "contention-fair", fairLock)
}

// ReadersWriter measures cfg.Goroutines readers and one writer on one key, a Client each,
// every hold cfg.Hold (busy), until N acquisitions in all: acquisitions per second, the
// readers' waits, and the writer's waits and share of the acquisitions (a writer that readers
// starve gets almost none).
func ReadersWriter(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	ms := make([]Mutex, cfg.Goroutines+1) // the last is the writer
	locks := make([]func(ctx context.Context, key string) (Held, error), len(ms))
	for g := range ms {
		m, done, err := lib.Open()
		if err != nil {
			return Result{}, err
		}
		defer done()
		ms[g] = m
		if locks[g], err = readLock(m); err != nil {
			return Result{}, err
		}
	}
	locks[len(ms)-1] = ms[len(ms)-1].Lock
	key := newKey("readers-writer")
	for g := range ms {
		if err := lockUnlockWith(ctx, locks[g], key, warmOps); err != nil {
			return Result{}, err
		}
	}

	n := r.N()
	waits := make([]time.Duration, n) // allocated before the timer starts
	var writes []time.Duration
	var next atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	before, _ := callsOf(ms...)
	r.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range ms {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				wait, err := takeTurn(ctx, locks[g], key, cfg.Hold)
				if err != nil {
					cancel(err)
					return
				}
				waits[i] = wait
				if g == len(ms)-1 {
					writes = append(writes, wait)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.StopTimer()
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	res := newResult(lib, "readers-writer", n, elapsed)
	res.Goroutines = len(ms)
	res.HandoffsPerSec = float64(n) / elapsed.Seconds()
	slices.Sort(waits)
	res.WaitP50, res.WaitP99, res.WaitMax = Percentile(waits, 50), Percentile(waits, 99), Percentile(waits, 100)
	slices.Sort(writes)
	res.Writes, res.WriteWaitP99 = len(writes), Percentile(writes, 99)
	roundTrips(&res, before, ms...)
	return res, nil
}
