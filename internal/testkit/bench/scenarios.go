package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker"
)

// warmOps is how many operations a scenario runs before its timer starts: the first dials
// connections and loads scripts.
const warmOps = 3

// lockUnlock locks and unlocks key n times.
func lockUnlock(ctx context.Context, m Mutex, key string, n int) error {
	return lockUnlockWith(ctx, m.Lock, key, n)
}

// lockUnlockWith locks key with lock and unlocks it, n times.
func lockUnlockWith(ctx context.Context, lock func(ctx context.Context, key string) (Held, error), key string, n int) error {
	for range n {
		h, err := lock(ctx, key)
		if err != nil {
			return fmt.Errorf("lock %q: %w", key, err)
		}
		if err := h.Unlock(); err != nil {
			return fmt.Errorf("unlock %q: %w", key, err)
		}
	}
	return nil
}

// roundTrips sets res.RoundTripsPerOp from the calls of ms since before.
func roundTrips(res *Result, before Calls, ms ...Mutex) {
	after, ok := callsOf(ms...)
	if ok && res.N > 0 {
		res.RoundTripsPerOp = float64(after.Sub(before).RoundTrips()) / float64(res.N)
	}
}

// Floor measures the raw floor of lib's driver: one operation is two EVALSHA calls of
// `return 1` through the driver's own script object, the least two round trips can cost.
func Floor(ctx context.Context, r Runner, lib Lib) (Result, error) {
	return floor(ctx, r, lib, "floor", lib.Floor)
}

// ScriptsFloor measures our two scripts, acquire.lua and release.lua, run through the driver's
// script object with the arguments the backend sends, without the Client: what the server's
// work adds to the floor.
func ScriptsFloor(ctx context.Context, r Runner, lib Lib) (Result, error) {
	return floor(ctx, r, lib, "floor-scripts", lib.ScriptFloor)
}

func floor(ctx context.Context, r Runner, lib Lib, name string, open func() (FloorOp, func(), error)) (Result, error) {
	if open == nil {
		return Result{}, ErrNotApplicable
	}
	opens := []func() (FloorOp, func(), error){open}
	if name != "floor" {
		opens = append(opens, lib.Floor) // for the side-by-side ratio
	}
	ops, done, err := openFloors(ctx, opens...)
	if err != nil {
		return Result{}, err
	}
	defer done()
	op := ops[0]
	n := r.N()
	r.ResetTimer()
	start := time.Now()
	for range n {
		if err := op(ctx); err != nil {
			r.StopTimer()
			return Result{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	elapsed := time.Since(start)
	r.StopTimer()
	res := newResult(lib, name, n, elapsed)
	res.RoundTripsPerOp = 2
	if name == "floor" {
		res.FloorRatio = 1
		return res, nil
	}
	res.ScriptsRatio = 1
	ratios, err := sideBySide(ctx, n, func() error { return op(ctx) }, ops[1])
	if err != nil {
		return Result{}, err
	}
	res.FloorRatio = ratios[0]
	return res, nil
}

// openFloors opens the floors that opens make (nil for a nil one) and warms them up: the first
// call loads the script (NOSCRIPT, then EVAL) and dials.
func openFloors(ctx context.Context, opens ...func() (FloorOp, func(), error)) ([]FloorOp, func(), error) {
	ops := make([]FloorOp, len(opens))
	var closers []func()
	done := func() {
		for _, c := range closers {
			c()
		}
	}
	for i, open := range opens {
		if open == nil {
			continue
		}
		op, c, err := open()
		if err != nil {
			done()
			return nil, nil, err
		}
		closers = append(closers, c)
		for range warmOps {
			if err := op(ctx); err != nil {
				done()
				return nil, nil, fmt.Errorf("floor: %w", err)
			}
		}
		ops[i] = op
	}
	return ops, done, nil
}

// Side-by-side ratios: at most sideBySideMax operations of each kind, in blocks of
// sideBySideBlock.
const (
	sideBySideMax   = 1000
	sideBySideBlock = 10
)

// sideBySide runs op and each floor in alternating blocks, min(n, sideBySideMax) times each,
// and returns, per floor, the floor's total time over op's (0 for a nil floor). Both are
// measured in the same stretch of time, so the ratio holds up on a machine whose load changes.
func sideBySide(ctx context.Context, n int, op func() error, floors ...FloorOp) ([]float64, error) {
	n = min(n, sideBySideMax)
	var opTime time.Duration
	floorTime := make([]time.Duration, len(floors))
	for done := 0; done < n; done += sideBySideBlock {
		k := min(sideBySideBlock, n-done)
		start := time.Now()
		for range k {
			if err := op(); err != nil {
				return nil, err
			}
		}
		opTime += time.Since(start)
		for i, f := range floors {
			if f == nil {
				continue
			}
			start := time.Now()
			for range k {
				if err := f(ctx); err != nil {
					return nil, fmt.Errorf("floor: %w", err)
				}
			}
			floorTime[i] += time.Since(start)
		}
	}
	ratios := make([]float64, len(floors))
	for i := range floors {
		if floorTime[i] > 0 && opTime > 0 {
			ratios[i] = float64(floorTime[i]) / float64(opTime)
		}
	}
	return ratios, nil
}

// Uncontended measures Lock+Unlock of one key by one goroutine: latency-bound, two round trips
// for our Client.
func Uncontended(ctx context.Context, r Runner, lib Lib) (Result, error) {
	m, done, err := lib.Open()
	if err != nil {
		return Result{}, err
	}
	defer done()
	key := newKey("uncontended")
	if err := lockUnlock(ctx, m, key, warmOps); err != nil {
		return Result{}, err
	}
	floors, closeFloors, err := openFloors(ctx, lib.Floor, lib.ScriptFloor)
	if err != nil {
		return Result{}, err
	}
	defer closeFloors()
	before, _ := callsOf(m)
	n := r.N()
	r.ResetTimer()
	start := time.Now()
	for range n {
		h, err := m.Lock(ctx, key)
		if err != nil {
			r.StopTimer()
			return Result{}, fmt.Errorf("lock: %w", err)
		}
		if err := h.Unlock(); err != nil {
			r.StopTimer()
			return Result{}, fmt.Errorf("unlock: %w", err)
		}
	}
	elapsed := time.Since(start)
	r.StopTimer()
	res := newResult(lib, "uncontended", n, elapsed)
	roundTrips(&res, before, m)
	ratios, err := sideBySide(ctx, n, func() error { return lockUnlock(ctx, m, key, 1) }, floors...)
	if err != nil {
		return Result{}, err
	}
	res.FloorRatio, res.ScriptsRatio = ratios[0], ratios[1]
	return res, nil
}

// Parallel measures Lock+Unlock by about goroutines goroutines sharing one client, each on a
// key of its own: throughput-bound; ns/op is wall time per operation of all goroutines.
func Parallel(ctx context.Context, r Runner, lib Lib, goroutines int) (Result, error) {
	m, done, err := lib.Open()
	if err != nil {
		return Result{}, err
	}
	defer done()
	base := newKey("parallel")
	// Warm-up in parallel, so that connection pools have grown to the concurrency.
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	for g := range goroutines {
		wg.Go(func() { errs[g] = lockUnlock(ctx, m, base+":warm:"+strconv.Itoa(g), warmOps) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}

	var (
		ids    atomic.Int64
		failed atomic.Pointer[error]
	)
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }
	before, _ := callsOf(m)
	n := r.N()
	r.ResetTimer()
	start := time.Now()
	r.RunParallel(goroutines, func(next func() bool) {
		key := base + ":" + strconv.FormatInt(ids.Add(1), 10)
		for next() {
			if failed.Load() != nil {
				return
			}
			h, err := m.Lock(ctx, key)
			if err != nil {
				fail(fmt.Errorf("lock: %w", err))
				return
			}
			if err := h.Unlock(); err != nil {
				fail(fmt.Errorf("unlock: %w", err))
				return
			}
		}
	})
	elapsed := time.Since(start)
	r.StopTimer()
	if err := failed.Load(); err != nil {
		return Result{}, *err
	}
	res := newResult(lib, "parallel-"+strconv.Itoa(goroutines), n, elapsed)
	res.Goroutines = int(ids.Load())
	roundTrips(&res, before, m)
	return res, nil
}

// Contention measures cfg.Goroutines goroutines taking turns on one key, each holding it for
// cfg.Hold (busy) before it unlocks: handoffs per second, and the wait of every Lock from the
// call to the acquisition (p50, p99, max). With shared, the goroutines share one client; else
// each has its own, as separate processes would. One operation is one acquisition.
func Contention(ctx context.Context, r Runner, lib Lib, cfg Config, shared bool) (Result, error) {
	name := "contention-separate"
	if shared {
		name = "contention-shared"
	}
	return contention(ctx, r, lib, cfg, shared, false, name, plainLock)
}

// A lockFunc is how a scenario locks through a Mutex: Lock, RLock, a fair Lock…
type lockFunc func(m Mutex) (func(ctx context.Context, key string) (Held, error), error)

// plainLock is Mutex.Lock.
func plainLock(m Mutex) (func(ctx context.Context, key string) (Held, error), error) {
	return m.Lock, nil
}

// contention is Contention with a name and a way to lock (each goroutine's m is passed to
// lockOf once, before the timer starts); with sleep, the holds sleep (see turns).
func contention(ctx context.Context, r Runner, lib Lib, cfg Config, shared, sleep bool, name string, lockOf lockFunc) (Result, error) {
	cfg = cfg.withDefaults()
	ms := make([]Mutex, cfg.Goroutines)
	for g := range ms {
		if shared && g > 0 {
			ms[g] = ms[0]
			continue
		}
		m, done, err := lib.Open()
		if err != nil {
			return Result{}, err
		}
		defer done()
		ms[g] = m
	}
	key := newKey("contention")
	locks := make([]func(ctx context.Context, key string) (Held, error), len(ms))
	for g, m := range ms {
		lock, err := lockOf(m)
		if err != nil {
			return Result{}, err
		}
		locks[g] = lock
		if shared && g > 0 {
			continue
		}
		if err := lockUnlockWith(ctx, lock, key, warmOps); err != nil {
			return Result{}, err
		}
	}

	res, t, err := measureTurns(ctx, r, lib, name, ms, locks, key, cfg.Hold, sleep)
	if err != nil {
		return Result{}, err
	}
	res.Goroutines = cfg.Goroutines
	res.Fairness = Fairness(t.counts)
	return res, nil
}

// measureTurns runs turns of N acquisitions on key under r's timer, and returns the result of
// scenario name for lib, with handoffs per second, waits and round trips.
func measureTurns(ctx context.Context, r Runner, lib Lib, name string, ms []Mutex, locks []func(ctx context.Context, key string) (Held, error), key string, hold time.Duration, sleep bool) (Result, turnsRun, error) {
	n := r.N()
	before, _ := callsOf(ms...)
	r.ResetTimer()
	t, err := turns(ctx, locks, key, n, hold, sleep)
	r.StopTimer()
	if err != nil {
		return Result{}, turnsRun{}, err
	}
	res := newResult(lib, name, n, t.elapsed)
	t.fill(&res)
	roundTrips(&res, before, ms...)
	return res, t, nil
}

// turnsRun is what turns measured.
type turnsRun struct {
	elapsed time.Duration
	waits   []time.Duration // of every acquisition, sorted
	counts  []int           // acquisitions per goroutine
	held    time.Duration   // the holds of every acquisition together
}

// fill sets res's handoffs per second, busy share and wait percentiles.
func (t turnsRun) fill(res *Result) {
	res.HandoffsPerSec = float64(len(t.waits)) / t.elapsed.Seconds()
	res.Busy = t.held.Seconds() / t.elapsed.Seconds()
	res.WaitP50, res.WaitP99, res.WaitMax = Percentile(t.waits, 50), Percentile(t.waits, 99), Percentile(t.waits, 100)
}

// turns runs one goroutine per lock function of locks, each taking turns on key (lock, hold
// for hold, unlock) until n acquisitions in all. The hold is busy, as a critical section's
// work would be, or, with sleep, a sleep, as one that waits on I/O would be.
func turns(ctx context.Context, locks []func(ctx context.Context, key string) (Held, error), key string, n int, hold time.Duration, sleep bool) (turnsRun, error) {
	waits := make([]time.Duration, n)
	held := make([]time.Duration, n)
	counts := make([]int, len(locks))
	var next atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range locks {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				wait, h, err := takeTurn(ctx, locks[g], key, hold, sleep)
				if err != nil {
					cancel(err)
					return
				}
				waits[i], held[i] = wait, h
				counts[g]++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return turnsRun{}, err
	}
	slices.Sort(waits)
	var sum time.Duration
	for _, h := range held {
		sum += h
	}
	return turnsRun{elapsed: elapsed, waits: waits, counts: counts, held: sum}, nil
}

// HotKeyClients is the number of Clients of the many-hot-keys scenario, and of goroutines on
// each of its keys.
const HotKeyClients = 4

// connSampleEvery is how often ManyHotKeys counts the server's connections.
const connSampleEvery = 50 * time.Millisecond

// ManyHotKeys measures cfg.Keys keys, each contended by HotKeyClients goroutines, one per
// Client: HotKeyClients Clients, each shared by cfg.Keys goroutines (one per key), so that
// every Client waits on up to cfg.Keys keys at once. Each goroutine locks its key, holds it
// for cfg.Hold (busy) and unlocks it, until N acquisitions in all (one operation is one
// acquisition). It reports handoffs per second, the wait of every Lock (call to acquisition),
// Jain's fairness over the goroutines and, when lib can count the server's connections
// (Lib.ServerConns), the connections per Client, all and pub/sub ones: the peak of each count,
// sampled every connSampleEvery during the run and once after it, less the count before the
// Clients were opened, over HotKeyClients.
func ManyHotKeys(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	var (
		conns    ConnCount
		baseline Conns
	)
	if lib.ServerConns != nil {
		c, done, err := lib.ServerConns()
		if err != nil {
			return Result{}, err
		}
		defer done()
		if baseline, err = c(ctx); err != nil {
			return Result{}, fmt.Errorf("counting connections: %w", err)
		}
		conns = c
	}
	ms := make([]Mutex, HotKeyClients)
	for i := range ms {
		m, done, err := lib.Open()
		if err != nil {
			return Result{}, err
		}
		defer done()
		ms[i] = m
	}
	base := newKey("many-hot-keys")
	keys := make([]string, cfg.Keys)
	for k := range keys {
		keys[k] = base + ":" + strconv.Itoa(k)
	}
	for _, m := range ms {
		if err := lockUnlock(ctx, m, keys[0], warmOps); err != nil {
			return Result{}, err
		}
	}

	n := r.N()
	waits := make([]time.Duration, n) // allocated before the timer starts
	counts := make([]int, len(keys)*len(ms))
	var next atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	peak := baseline
	sample := func() {
		c, err := conns(ctx)
		if err != nil {
			cancel(fmt.Errorf("counting connections: %w", err))
			return
		}
		peak.All, peak.PubSub = max(peak.All, c.All), max(peak.PubSub, c.PubSub)
	}
	before, _ := callsOf(ms...)
	r.ResetTimer()
	start := time.Now()
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	if conns != nil {
		sampler.Go(func() {
			t := time.NewTicker(connSampleEvery)
			defer t.Stop()
			for {
				sample()
				select {
				case <-t.C:
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	// Key by key, a goroutine per Client: the first acquisitions are contended ones. Goroutine g
	// owns op g, so that each one takes its key at least once however late it is scheduled
	// (when n allows); the ops after those are claimed in turn.
	next.Store(int64(len(counts)))
	for k, key := range keys {
		for c, m := range ms {
			g := k*len(ms) + c
			wg.Go(func() {
				for i := int64(g); ; i = next.Add(1) - 1 {
					if i >= int64(n) || ctx.Err() != nil {
						return
					}
					wait, _, err := takeTurn(ctx, m.Lock, key, cfg.Hold, false)
					if err != nil {
						cancel(err)
						return
					}
					waits[i] = wait
					counts[g]++
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	sampler.Wait()
	r.StopTimer()
	if conns != nil && ctx.Err() == nil {
		sample() // a run shorter than connSampleEvery has one sample from before it otherwise
	}
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	res := newResult(lib, "many-hot-keys", n, elapsed)
	res.Keys, res.Clients, res.Goroutines = len(keys), len(ms), len(counts)
	res.HandoffsPerSec = float64(n) / elapsed.Seconds()
	slices.Sort(waits)
	res.WaitP50, res.WaitP99, res.WaitMax = Percentile(waits, 50), Percentile(waits, 99), Percentile(waits, 100)
	res.Fairness = Fairness(counts)
	if conns != nil {
		res.ConnsPerClient = float64(peak.All-baseline.All) / float64(len(ms))
		res.PubSubConnsPerClient = float64(peak.PubSub-baseline.PubSub) / float64(len(ms))
	}
	roundTrips(&res, before, ms...)
	return res, nil
}

// Reentry measures Lock, Lock and Lock again through the previous hold's context (hold count
// 3), then three Unlocks, as one operation; six round trips for our Client.
func Reentry(ctx context.Context, r Runner, lib Lib) (Result, error) {
	if !lib.Reentrant {
		return Result{}, ErrNotApplicable
	}
	m, done, err := lib.Open()
	if err != nil {
		return Result{}, err
	}
	defer done()
	key := newKey("reentry")
	depth3 := func() error {
		var hs [3]Held
		lctx := ctx
		for i := range hs {
			h, err := m.Lock(lctx, key)
			if err != nil {
				return fmt.Errorf("lock (depth %d): %w", i+1, err)
			}
			hs[i], lctx = h, h.Context()
		}
		for i := len(hs) - 1; i >= 0; i-- {
			if err := hs[i].Unlock(); err != nil {
				return fmt.Errorf("unlock (depth %d): %w", i+1, err)
			}
		}
		return nil
	}
	// Warm up, and check that the library does re-enter.
	h, err := m.Lock(ctx, key)
	if err != nil {
		return Result{}, err
	}
	inner, err := m.Lock(h.Context(), key)
	if err == nil {
		if l, ok := inner.(*locker.Lease); ok && l.Holds() != 2 {
			err = fmt.Errorf("re-entry reported %d holds, want 2", l.Holds())
		}
		err = errors.Join(err, inner.Unlock())
	}
	if err = errors.Join(err, h.Unlock()); err != nil {
		return Result{}, err
	}
	for range warmOps {
		if err := depth3(); err != nil {
			return Result{}, err
		}
	}

	floors, closeFloors, err := openFloors(ctx, lib.Floor)
	if err != nil {
		return Result{}, err
	}
	defer closeFloors()

	before, _ := callsOf(m)
	n := r.N()
	r.ResetTimer()
	start := time.Now()
	for range n {
		if err := depth3(); err != nil {
			r.StopTimer()
			return Result{}, err
		}
	}
	elapsed := time.Since(start)
	r.StopTimer()
	res := newResult(lib, "reentry-3", n, elapsed)
	roundTrips(&res, before, m)
	ratios, err := sideBySide(ctx, n, depth3, floors...)
	if err != nil {
		return Result{}, err
	}
	res.FloorRatio = ratios[0]
	return res, nil
}

// Watchdog holds cfg.Leases leases (distinct keys, TTL cfg.LeaseTTL) on one Client and watches
// its watchdog for N renewal periods (LeaseTTL/3; one operation is one period, and its
// allocations are the watchdog's). It reports, per tick — one renewal of every lease — the
// Renew calls (each is one pipeline, so these are the round trips per tick) and the process's
// CPU time (user+system), with the leases per Renew call and the leases lost.
func Watchdog(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
	if lib.Backend == nil {
		return Result{}, ErrNotApplicable
	}
	cfg = cfg.withDefaults()
	be, done, err := lib.Backend()
	if err != nil {
		return Result{}, err
	}
	defer done()
	cnt := Count(be)
	c := locker.New(cnt, append(slices.Clip(lib.opts), locker.WithTTL(cfg.LeaseTTL))...)
	defer c.Close()

	base := newKey("watchdog")
	leases := make([]*locker.Lease, cfg.Leases)
	defer func() {
		// Release what is still held, concurrently: 10,000 sequential round trips are slow.
		_ = forEach(ctx, 32, len(leases), func(i int) error {
			if leases[i] != nil && leases[i].Context().Err() == nil {
				_ = leases[i].Unlock()
			}
			return nil
		})
	}()
	heap0 := liveHeap()
	err = forEach(ctx, 32, len(leases), func(i int) error {
		l, err := c.Lock(ctx, base+":"+strconv.Itoa(i))
		leases[i] = l
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("taking %d leases: %w", cfg.Leases, err)
	}
	perLease := float64(liveHeap()-heap0) / float64(cfg.Leases)
	tick := cfg.LeaseTTL / 3
	// Let the renewals of leases taken at different times fall into one batch per tick.
	if err := sleep(ctx, 3*tick); err != nil {
		return Result{}, err
	}

	n := r.N()
	calls0, cpu0 := cnt.Calls(), cpuTime()
	r.ResetTimer()
	start := time.Now()
	err = sleep(ctx, time.Duration(n)*tick)
	elapsed := time.Since(start)
	r.StopTimer()
	calls, cpu := cnt.Calls().Sub(calls0), cpuTime()
	if err != nil {
		return Result{}, err
	}
	res := newResult(lib, "watchdog", n, elapsed)
	res.Leases, res.BytesPerLease = cfg.Leases, max(perLease, 0)
	// A tick is one renewal of every lease. Counted by the leases renewed rather than by the
	// clock, the figures do not depend on how many renewals fell into the window.
	ticks := float64(calls.RenewEntries) / float64(cfg.Leases)
	if ticks == 0 {
		ticks = float64(elapsed) / float64(tick)
	}
	res.RenewCallsPerTick = float64(calls.Renew) / ticks
	if calls.Renew > 0 {
		res.LeasesPerCall = float64(calls.RenewEntries) / float64(calls.Renew)
	}
	res.CPUPerTick = -1
	if cpu0 >= 0 && cpu >= 0 {
		res.CPUPerTick = time.Duration(float64(cpu-cpu0) / ticks)
	}
	for _, l := range leases {
		if context.Cause(l.Context()) == locker.ErrLockLost {
			res.Lost++
		}
	}
	return res, nil
}

// liveHeap returns the bytes of live heap objects, after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// forEach calls f(i) for every i in [0, n) from workers goroutines, and returns the first error
// (after which the remaining calls are not made).
func forEach(ctx context.Context, workers, n int, f func(i int) error) error {
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() != nil || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return ctx.Err()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fairness returns Jain's fairness index of the shares in counts: (Σx)² / (n·Σx²), 1 when
// every share is equal, 1/n when one took everything (0 for no shares).
func Fairness(counts []int) float64 {
	var sum, squares float64
	for _, c := range counts {
		sum += float64(c)
		squares += float64(c) * float64(c)
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * squares)
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the nearest-rank method:
// the smallest value that at least p% of the values are less than or equal to. It returns 0
// for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// takeTurn locks key with lock, holds it for hold (busy, as the critical section's work would be;
// with sleep, sleeping first, as one that waits on I/O would) and unlocks it. It returns how long
// Lock waited, from the call to the acquisition, and how long the caller held the lock, from
// the acquisition to the call of Unlock.
func takeTurn(ctx context.Context, lock func(ctx context.Context, key string) (Held, error), key string, hold time.Duration, sleep bool) (wait, held time.Duration, err error) {
	called := time.Now()
	h, err := lock(ctx, key)
	if err != nil {
		return 0, 0, fmt.Errorf("lock: %w", err)
	}
	got := time.Now()
	if sleep {
		time.Sleep(hold)
	}
	for time.Since(got) < hold {
		// Busy: the critical section's work.
	}
	held = time.Since(got)
	if err := h.Unlock(); err != nil {
		return 0, 0, fmt.Errorf("unlock: %w", err)
	}
	return got.Sub(called), held, nil
}
