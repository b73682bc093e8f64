// Readers and writers across OS processes: the workers of multiprocess_test.go, some taking
// shared holds (RLock) and some exclusive ones (Lock) on one key of one real server; the merged
// history is checked as that of one readers/writer lock, and the writers must not starve.
package backend_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/history"
	"github.com/hashlock/locker/internal/redistest"
)

// The modes of a readers/writer worker (workerSpec.Mode).
const (
	readerMode = "reader"
	writerMode = "writer"
)

const (
	// rwRun is how long the workers of TestMultiProcessReadersWriter run (half with -short).
	rwRun = 2 * time.Second
	// rwMaxOps bounds each worker's cycles, and so the history porcupine checks.
	rwMaxOps = 3000
	// rwMinWrites is how many exclusive holds each writer must obtain while the readers keep
	// coming: far fewer than it gets when waiting writers hold new readers back, so that only a
	// starved writer misses it.
	rwMinWrites = 10
)

// rwReaders and rwWriters are the drivers of the readers and the writers of
// TestMultiProcessReadersWriter: every driver reads, and two of them write as well.
var (
	rwReaders = []string{"goredis", "rueidis", "redigo", "valkey"}
	rwWriters = []string{"goredis-pool1", "redigo"}
)

// Four processes read (RLock, a critical section of up to 2ms, Unlock, again) and two write
// (Lock, up to 50µs, Unlock, a pause of 1–4ms, again) one key of one server for two seconds,
// each with another driver or configuration, recording their calls with the shared monotonic
// clock and the fencing tokens they got. The merged history must be that of one readers/writer
// lock: linearizable (porcupine's model: free, one writer, or a set of readers), without a
// writer overlapping anyone, with writers' tokens increasing and readers reporting their
// writer's. Readers must have read together (at least two at once), and each writer must have
// written at least rwMinWrites times while the readers kept coming: with four readers whose
// sections overlap, the key is rarely free, so a writer gets through only because a waiting
// writer holds new readers back.
//
//	go test -race -run '^TestMultiProcessReadersWriter$' -v ./backend/
func TestMultiProcessReadersWriter(t *testing.T) {
	srv := redistest.StartServer(t)
	run := rwRun
	if testing.Short() {
		run /= 2
	}
	timeout := run + time.Minute
	var specs []workerSpec
	for _, d := range rwReaders {
		specs = append(specs, workerSpec{Process: len(specs), Driver: d, Mode: readerMode})
	}
	for _, d := range rwWriters {
		specs = append(specs, workerSpec{Process: len(specs), Driver: d, Mode: writerMode})
	}
	var roles []string
	for i := range specs {
		s := &specs[i]
		s.Addrs, s.Key, s.Ops, s.For, s.Timeout = []string{srv.Addr}, "multiprocess-rw", rwMaxOps, run, timeout
		roles = append(roles, fmt.Sprintf("p%d %s %s", s.Process, s.Driver, s.Mode))
	}
	ops, wall := runWorkers(t, specs)
	res := history.Check(ops, history.Options{Fenced: true, Timeout: timeout})
	st := rwStatsOf(ops)
	t.Logf("%d workers (%s) for %v on one server: %v; workers' wall time %v; writes while reading: %v",
		len(specs), strings.Join(roles, ", "), run, res, wall.Round(time.Millisecond), st.writesWhileReading)
	failOnViolations(t, res)
	checkRW(t, res, st, len(rwReaders), len(rwWriters), rwMinWrites)
}

// rwStats is what a readers/writer history shows besides Check's verdict.
type rwStats struct {
	readers, writers map[int]int // sections per reading, writing process
	// writesWhileReading counts, per writing process, its exclusive holds obtained before
	// every reader's last shared acquire was called: while all readers kept coming.
	writesWhileReading map[int]int
}

// rwStatsOf computes the rwStats of ops (processes either read or write).
func rwStatsOf(ops []history.Op) rwStats {
	st := rwStats{readers: map[int]int{}, writers: map[int]int{}, writesWhileReading: map[int]int{}}
	lastRead := map[int]int64{} // per reader, its last shared acquire's call
	for _, op := range ops {
		switch {
		case op.Kind != history.Acquire:
		case op.Shared:
			st.readers[op.Process]++
			lastRead[op.Process] = max(lastRead[op.Process], op.Call)
		default:
			st.writers[op.Process]++
		}
	}
	var until int64 = -1 << 63
	for _, c := range lastRead {
		if until == -1<<63 || c < until {
			until = c
		}
	}
	for p := range st.writers {
		st.writesWhileReading[p] = 0
	}
	for _, op := range ops {
		if op.Kind == history.Acquire && !op.Shared && op.Return < until {
			st.writesWhileReading[op.Process]++
		}
	}
	return st
}

// checkRW fails t with rwProblem's error, if any.
func checkRW(t *testing.T, res *history.Result, st rwStats, readers, writers, minWrites int) {
	t.Helper()
	if err := rwProblem(res, st, readers, writers, minWrites); err != nil {
		t.Fatal(err)
	}
}

// rwProblem returns an error unless the history had the readers and writers asked for, readers
// holding the key together, and each writer obtaining it at least minWrites times while they
// read.
func rwProblem(res *history.Result, st rwStats, readers, writers, minWrites int) error {
	if len(st.readers) != readers || len(st.writers) != writers {
		return fmt.Errorf("%v: %d reading and %d writing processes, want %d and %d", res, len(st.readers), len(st.writers), readers, writers)
	}
	if res.MaxShared < 2 {
		return fmt.Errorf("%v: readers never held the key together", res)
	}
	for _, p := range slices.Sorted(maps.Keys(st.writesWhileReading)) {
		if n := st.writesWhileReading[p]; n < minWrites {
			return fmt.Errorf("writer p%d obtained the key %d times (of %d) while the readers kept coming, want at least %d: starved",
				p, n, st.writers[p], minWrites)
		}
	}
	return nil
}

// readersIgnoreWriters is a broken readers/writer lock: shared holds are granted whatever the
// key's state (and released without a trace).
type readersIgnoreWriters struct{ *memory.Backend }

func (b readersIgnoreWriters) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if req.Shared {
		return locker.Acquisition{Holds: 1}, nil
	}
	return b.Backend.Acquire(ctx, req)
}

func (b readersIgnoreWriters) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if req.Shared {
		return 0, nil
	}
	return b.Backend.Release(ctx, req)
}

func (b readersIgnoreWriters) Renew(ctx context.Context, batch []locker.Renewal) []error {
	return make([]error, len(batch)) // the readers' holds do not exist
}

// readersExclusive is a lock sound but not shared: a shared hold is taken as an exclusive one.
type readersExclusive struct{ *memory.Backend }

func (b readersExclusive) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	req.Shared = false
	a, err := b.Backend.Acquire(ctx, req)
	a.Token = 0 // as a reader before any writer reports
	return a, err
}

func (b readersExclusive) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	req.Shared = false
	return b.Backend.Release(ctx, req)
}

// noWriterQueue is a readers/writer lock that does not hold new readers back for a waiting
// writer: its exclusive requests never queue (AcquireRequest.Wait is dropped).
type noWriterQueue struct{ *memory.Backend }

func (b noWriterQueue) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if !req.Shared {
		req.Wait = 0
	}
	return b.Backend.Acquire(ctx, req)
}

// The harness of TestMultiProcessReadersWriter (the same cycles, recorded and checked the same
// way, in goroutines instead of processes) passes the memory backend and flags broken
// readers/writer locks: one whose readers ignore writers is not linearizable and its writers
// overlap readers; one whose readers exclude each other is a sound lock but never shares; one
// that lets new readers pass a waiting writer starves it.
func TestMultiProcessReadersWriterHarness(t *testing.T) {
	for _, c := range []struct {
		name    string
		backend locker.Locker
		verdict porcupine.CheckResult
		want    string // in a violation or rwProblem's error; "" for none
	}{
		{"memory", memory.New(), porcupine.Ok, ""},
		{"readers-ignore-writers", readersIgnoreWriters{memory.New()}, porcupine.Illegal, "held the lock shared from"},
		{"readers-exclusive", readersExclusive{memory.New()}, porcupine.Ok, "readers never held the key together"},
		{"no-writer-queue", noWriterQueue{memory.New()}, porcupine.Ok, "starved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			const readers, writers = 4, 1
			ops := rwInGoroutines(t, c.backend, readers, writers, 300*time.Millisecond)
			res := history.Check(ops, history.Options{Fenced: true, Timeout: time.Minute})
			st := rwStatsOf(ops)
			problems := res.Violations
			if err := rwProblem(res, st, readers, writers, 5); err != nil {
				problems = append(problems, err.Error())
			}
			t.Logf("%v; writes while reading: %v", res, st.writesWhileReading)
			if res.Linearizable != c.verdict || (len(problems) == 0) != (c.want == "") || (c.want != "" && !anyContains(problems, c.want)) {
				t.Fatalf("porcupine: %s, want %s; problems (want one with %q):\n%s", res.Linearizable, c.verdict, c.want, strings.Join(problems, "\n"))
			}
		})
	}
}

// rwCycles reads (reader: RLock) or writes (Lock) key for d, at most n times, recording every
// operation in rec. A reader's critical section sleeps up to 2ms; a writer's is up to 50µs of
// work that yields the processor, and it pauses 1–4ms before its next Lock, so that readers get
// the key in between. Any error ends it: a history holds completed operations only.
func rwCycles(ctx context.Context, c *locker.Client, key string, reader bool, d time.Duration, n int, rec *history.Recorder) error {
	end := time.Now().Add(d)
	for i := 0; i < n && time.Now().Before(end); i++ {
		call := history.Now()
		var (
			l   *locker.Lease
			err error
		)
		if reader {
			l, err = c.RLock(ctx, key)
		} else {
			l, err = c.Lock(ctx, key)
		}
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		if l.Shared() != reader {
			return fmt.Errorf("cycle %d: a lease with Shared() %v, want %v", i, l.Shared(), reader)
		}
		if reader {
			rec.AcquiredShared(call, l.Token(), l.Holds())
			time.Sleep(rand.N(2 * time.Millisecond)) // the work: not a synchronisation
		} else {
			rec.Acquired(call, l.Token(), l.Holds())
			for end := history.Now() + rand.Int64N(50_000); history.Now() < end; {
				runtime.Gosched()
			}
		}
		if err := l.Context().Err(); err != nil {
			return fmt.Errorf("cycle %d: the lease ended while held: %w", i, context.Cause(l.Context()))
		}
		call = history.Now()
		if err := l.Unlock(); err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		if reader {
			rec.ReleasedShared(call)
		} else {
			rec.Released(call)
			time.Sleep(time.Millisecond + rand.N(3*time.Millisecond))
		}
	}
	return nil
}

// rwInGoroutines runs rwCycles for d on one key of backend in goroutines, readers then
// writers (each with a Client of its own, as the processes of TestMultiProcessReadersWriter),
// and returns their merged history.
func rwInGoroutines(t *testing.T, backend locker.Locker, readers, writers int, d time.Duration) []history.Op {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg   sync.WaitGroup
		recs []*history.Recorder
	)
	for p := range readers + writers {
		rec := history.NewRecorder(p)
		recs = append(recs, rec)
		c := locker.New(backend, locker.WithTTL(workerTTL), locker.WithFencing())
		defer c.Close()
		wg.Go(func() {
			if err := rwCycles(ctx, c, "harness-rw", p < readers, d, rwMaxOps, rec); err != nil {
				t.Errorf("worker %d: %v", p, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var ops []history.Op
	for _, r := range recs {
		ops = append(ops, r.Ops()...)
	}
	return ops
}
