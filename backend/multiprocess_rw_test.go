// Readers and writers across OS processes: the workers of multiprocess_test.go, some taking
// shared holds (RLock) and some exclusive ones (Lock) on one key of one real server, with leases
// of different lengths, fixed and renewed; the merged history is checked as that of one
// readers/writer lock, and the writers must not starve.
package backend_test

import (
	"cmp"
	"context"
	"errors"
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
	"github.com/hashlock/locker/internal/testkit/history"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The modes of a readers/writer worker (rwRole.Mode), and of a semaphore's holder.
const (
	readerMode = "reader"
	writerMode = "writer"
	permitMode = "permit" // Acquire of one of Limit permits (multiprocess_semaphore_test.go)
)

const (
	// rwRun is how long the workers of TestMultiProcessReadersWriter run (half with -short).
	rwRun = 2 * time.Second
	// rwMaxOps bounds each worker's cycles, and so the history porcupine checks.
	rwMaxOps = 3000
	// rwMinWrites is how many exclusive holds each writer must obtain while the readers keep
	// coming: far fewer than it gets when waiting writers hold new readers back, so that only a
	// starved writer misses it.
	rwMinWrites = 5
	// rwShortTTL is the fixed lease of the short readers, which hold the key for 2ms at most:
	// from the send of the RLock that got it to the return of its Unlock, they were seen to use
	// up to 65ms of it with two runs of these tests at once under -race on two cores (145ms in a
	// stall of the whole machine), so that they keep it; one that runs out all the same is no
	// failure (see rwCycles). It is shorter than the long readers' sections.
	rwShortTTL = 200 * time.Millisecond
)

// rwRole is what a worker of a readers/writer run does, cycle after cycle (rwCycles): it pauses
// for a random length in Pause, takes the key (Mode), holds it for a random length in Section (a
// reader or a permit's holder sleeps; a writer works, yielding the processor) and releases it.
// Its Client's lease is TTL (workerTTL when 0), which the watchdog renews unless Fixed.
type rwRole struct {
	Mode    string // readerMode (RLock), writerMode (Lock) or permitMode (Acquire); "" in a worker that only cycles
	TTL     time.Duration
	Fixed   bool
	Section span
	Pause   span
	Limit   int  // permitMode: the semaphore's permits
	Fair    bool // every call with WithFair
}

// span is a range of durations, from Min to Max.
type span struct{ Min, Max time.Duration }

// draw returns a random duration in s.
func (s span) draw() time.Duration {
	if s.Max <= s.Min {
		return s.Min
	}
	return s.Min + rand.N(s.Max-s.Min)
}

// options returns the options of the role's Client: its lease, and fencing.
func (r rwRole) options() []locker.Option {
	opts := []locker.Option{locker.WithTTL(cmp.Or(r.TTL, workerTTL)), locker.WithFencing()}
	if r.Fixed {
		opts = append(opts, locker.WithoutRenewal())
	}
	return opts
}

// The roles of TestMultiProcessReadersWriter and of its harness. The readers' leases differ:
// short readers come and go with a short fixed lease, while long readers, with long renewed
// leases, stay in longer than that. A lock that keeps one lease for a key in shared mode, set by
// every reader to its own (the bug of "two owners inside"), lets it run out under a long reader
// once a writer waits (new readers then wait behind it) with a short reader the last one in, and
// lets the writer in beside the long reader, whose lease says it still holds the key: the
// history shows the overlap. A long reader that was itself the last one in is covered by its own
// lease, so not every section shows the bug; with two long readers, a few sections a run, the
// harness caught it in 100 runs of 100, and TestMultiProcessReadersWriter in 102 of 104 on the
// Redis backends.
var (
	// shortReader reads for up to 2ms, again and again, with a fixed lease of rwShortTTL.
	shortReader = rwRole{Mode: readerMode, TTL: rwShortTTL, Fixed: true, Section: span{0, 2 * time.Millisecond}}
	// longReader pauses 200–600ms, while the writers get their turns, then reads for 300–500ms,
	// past rwShortTTL by 100ms or more, with a renewed lease of 1.2s: the watchdog renews it at
	// 400ms, during the longer sections (a hold lost before then ends the lease's context).
	longReader = rwRole{Mode: readerMode, TTL: 1200 * time.Millisecond,
		Section: span{300 * time.Millisecond, 500 * time.Millisecond}, Pause: span{200 * time.Millisecond, 600 * time.Millisecond}}
	// longerReader is longReader with a renewed lease of 3s, which the watchdog never renews
	// during a section (Unlock finds a lost hold gone).
	longerReader = rwRole{Mode: readerMode, TTL: 3 * time.Second, Section: longReader.Section, Pause: longReader.Pause}
	// writer pauses 5–15ms, so that readers get the key in between, then writes for up to 50µs.
	writer = rwRole{Mode: writerMode, TTL: workerTTL, Section: span{0, 50 * time.Microsecond}, Pause: span{5 * time.Millisecond, 15 * time.Millisecond}}
)

// rwWorkers are the workers of TestMultiProcessReadersWriter, each with its driver (a process
// each), and of its harness (a goroutine each): three short readers, two long ones, two writers.
var rwWorkers = []struct {
	driver string
	role   rwRole
}{
	{"goredis", shortReader}, {"rueidis", longReader}, {"redigo", shortReader}, {"valkey", longerReader},
	{"rueidis", shortReader}, {"goredis-pool1", writer}, {"redigo", writer},
}

// rwCount returns how many of rwWorkers have mode.
func rwCount(mode string) int {
	n := 0
	for _, w := range rwWorkers {
		if w.role.Mode == mode {
			n++
		}
	}
	return n
}

// Seven processes take turns on one key of one server for two seconds (rwWorkers), each with
// another driver or configuration: three short readers (RLock, a critical section of up to 2ms,
// Unlock, again) with a fixed lease of rwShortTTL, two long readers (a pause, then 300–500ms)
// with renewed leases of 1.2s and 3s, and two writers (a pause of 5–15ms, Lock, up to 50µs,
// Unlock). They record their calls with the shared monotonic clock and the fencing tokens they
// got; a release is recorded from the last instant the lease's context said the hold was held
// (see rwCycles), so that a hold lost while its lease said it held shows as held until then.
// The merged history must be that of one readers/writer lock: linearizable (porcupine's model:
// free, one writer, or a set of readers), without a writer overlapping anyone, with writers'
// tokens increasing and readers reporting their writer's; and no hold may be lost while its
// lease says it is held (but for a fixed lease that ran out: see rwCycles). Readers must have
// read together (at least two at once), and each writer must have written at least rwMinWrites
// times while the short readers kept coming: their sections overlap, so the key is rarely free,
// and a writer gets through only because a waiting writer holds new readers back.
//
// The leases differ so that a lock whose readers' holds all end with the latest reader's lease
// is caught (see shortReader and the other roles): a writer gets in beside a long reader.
//
//	go test -race -run '^TestMultiProcessReadersWriter$' -v ./backend/
func TestMultiProcessReadersWriter(t *testing.T) {
	srv := redistest.StartServer(t)
	run := rwRun
	if testing.Short() {
		run /= 2
	}
	timeout := run + time.Minute
	var (
		specs []workerSpec
		roles []string
	)
	for i, w := range rwWorkers {
		specs = append(specs, workerSpec{Process: i, Driver: w.driver, Addrs: []string{srv.Addr}, Key: "multiprocess-rw",
			Ops: rwMaxOps, Timeout: timeout, rwRole: w.role, For: run})
		lease := "renewed"
		if w.role.Fixed {
			lease = "fixed"
		}
		roles = append(roles, fmt.Sprintf("p%d %s %s %v %s", i, w.driver, w.role.Mode, w.role.TTL, lease))
	}
	ops, wall := runWorkers(t, specs)
	res := history.Check(ops, history.Options{Fenced: true, Timeout: timeout})
	st := rwStatsOf(ops)
	t.Logf("%d workers (%s) for %v on one server: %v; workers' wall time %v; writes while reading: %v",
		len(specs), strings.Join(roles, ", "), run, res, wall.Round(time.Millisecond), st.writesWhileReading)
	failOnViolations(t, res)
	checkRW(t, res, st, rwCount(readerMode), rwCount(writerMode), rwMinWrites)
}

// rwStats is what a readers/writer history shows besides Check's verdict.
type rwStats struct {
	readers, writers map[int]int // sections per reading, writing process
	// writesWhileReading counts, per writing process, its exclusive holds obtained before
	// every short reader's last shared acquire was called: while they all kept coming, and
	// kept the key busy.
	writesWhileReading map[int]int
}

// rwStatsOf computes the rwStats of ops of rwWorkers (processes either read or write).
func rwStatsOf(ops []history.Op) rwStats {
	st := rwStats{readers: map[int]int{}, writers: map[int]int{}, writesWhileReading: map[int]int{}}
	lastRead := map[int]int64{} // per short reader, its last shared acquire's call
	for _, op := range ops {
		switch {
		case op.Kind != history.Acquire:
		case op.Shared:
			st.readers[op.Process]++
			if op.Process < len(rwWorkers) && rwWorkers[op.Process].role == shortReader {
				lastRead[op.Process] = max(lastRead[op.Process], op.Call)
			}
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

// latestReaderLease is the bug of "two owners inside": a key in shared mode has one lease,
// which every reader's acquire and renewal sets to that reader's TTL, so that a reader with a
// short lease shortens the others'; when it runs out, the holds of every reader still inside
// end, whatever their own leases (the backend releases them: a writer that waits gets the key).
type latestReaderLease struct {
	*memory.Backend
	mu   sync.Mutex
	keys map[string]*sharedLease
}

// sharedLease is the one lease of a key in shared mode: the owners of its readers' holds, when it
// runs out, and the timer that ends them then.
type sharedLease struct {
	readers map[string]bool
	until   time.Time
	timer   *time.Timer
}

func (b *latestReaderLease) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, err := b.Backend.Acquire(ctx, req)
	if err == nil && a.Holds > 0 && req.Shared {
		s := b.keys[req.Key]
		if s == nil {
			s = &sharedLease{readers: map[string]bool{}}
			s.timer = time.AfterFunc(time.Hour, func() { b.runOut(req.Key, s) })
			if b.keys == nil {
				b.keys = map[string]*sharedLease{}
			}
			b.keys[req.Key] = s
		}
		s.readers[req.Owner] = true
		s.set(req.TTL)
	}
	return a, err
}

func (b *latestReaderLease) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.Backend.Release(ctx, req)
	if s := b.keys[req.Key]; s != nil && req.Shared && n == 0 {
		delete(s.readers, req.Owner)
		if len(s.readers) == 0 { // the key is free
			s.timer.Stop()
			delete(b.keys, req.Key)
		}
	}
	return n, err
}

func (b *latestReaderLease) Renew(ctx context.Context, batch []locker.Renewal) []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := b.Backend.Renew(ctx, batch)
	for i, r := range batch {
		if s := b.keys[r.Key]; s != nil && s.readers[r.Owner] && errs[i] == nil {
			s.set(r.TTL)
		}
	}
	return errs
}

// set makes the lease run out ttl from now.
func (s *sharedLease) set(ttl time.Duration) {
	s.until = time.Now().Add(ttl)
	s.timer.Reset(ttl)
}

// runOut ends the holds of s's readers, unless s was set again meanwhile.
func (b *latestReaderLease) runOut(key string, s *sharedLease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys[key] != s || time.Now().Before(s.until) {
		return
	}
	delete(b.keys, key)
	for owner := range s.readers {
		_, _ = b.Backend.Release(context.Background(), locker.ReleaseRequest{Key: key, Owner: owner, Shared: true})
	}
}

// The harness of TestMultiProcessReadersWriter (the same workers and cycles, for rwRun also with
// -short, recorded and checked the same way, in goroutines instead of processes; the cases run
// in parallel) passes the memory backend and flags broken readers/writer locks: one whose
// readers ignore writers is not linearizable and its writers overlap readers; one whose readers'
// holds all end with the latest reader's lease (the bug of "two owners inside") lets a writer in
// beside a long reader whose lease says it still holds the key; one whose readers exclude each
// other is a sound lock but never shares; one that lets new readers pass a waiting writer
// starves it.
func TestMultiProcessReadersWriterHarness(t *testing.T) {
	for _, c := range []harnessCase{ // want: in a violation or rwProblem's error
		{"memory", memory.New(), porcupine.Ok, ""},
		{"readers-ignore-writers", readersIgnoreWriters{memory.New()}, porcupine.Illegal, "held the lock shared from"},
		{"latest-reader-lease", &latestReaderLease{Backend: memory.New()}, porcupine.Illegal, "held the lock shared from"},
		{"readers-exclusive", readersExclusive{memory.New()}, porcupine.Ok, "readers never held the key together"},
		{"no-writer-queue", noWriterQueue{memory.New()}, porcupine.Ok, "starved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var roles []rwRole
			for _, w := range rwWorkers {
				roles = append(roles, w.role)
			}
			ops, errs := rwInGoroutines(c.backend, roles, 1, rwRun)
			res := history.Check(ops, history.Options{Fenced: true, Timeout: time.Minute})
			st := rwStatsOf(ops)
			problems := slices.Concat(res.Violations, errs)
			if err := rwProblem(res, st, rwCount(readerMode), rwCount(writerMode), rwMinWrites); err != nil {
				problems = append(problems, err.Error())
			}
			t.Logf("%v; writes while reading: %v", res, st.writesWhileReading)
			c.check(t, res, problems)
		})
	}
}

// rwCycles reads (RLock), writes (Lock) or holds a permit of (Acquire) key for d, at most n
// times, as role says, recording every operation in rec. A release is recorded as called at the last instant the lease's
// context said the hold was held: just before Unlock, or earlier when the context ended during
// the section. The hold ended after that instant, at the release or when it was lost, also when
// Unlock found it gone (ErrNotHeld): the history then shows whether another owner got the key
// while the lease said it was held. A lost hold is an error, which ends the cycles (a history
// holds completed operations only), unless it is a fixed lease that ran out.
func rwCycles(ctx context.Context, c *locker.Client, key string, role rwRole, d time.Duration, n int, rec *history.Recorder) error {
	reader := role.Mode == readerMode
	lock, acquired, released := c.Lock, rec.Acquired, rec.Released
	switch role.Mode {
	case readerMode:
		lock, acquired, released = c.RLock, rec.AcquiredShared, rec.ReleasedShared
	case permitMode:
		lock = func(ctx context.Context, key string, opts ...locker.Option) (*locker.Lease, error) {
			return c.Acquire(ctx, key, role.Limit, opts...)
		}
		acquired = func(call int64, token uint64, holds int) { rec.AcquiredPermit(call, role.Limit, token, holds) }
		released = func(call int64) { rec.ReleasedPermit(call, role.Limit) }
	}
	var opts []locker.Option
	if role.Fair {
		opts = append(opts, locker.WithFair())
	}
	end := time.Now().Add(d)
	for i := 0; i < n; i++ {
		if time.Sleep(role.Pause.draw()); !time.Now().Before(end) {
			break
		}
		call := history.Now()
		l, err := lock(ctx, key, opts...)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		if l.Shared() != reader || l.Limit() != role.Limit {
			return fmt.Errorf("cycle %d: a lease with Shared() %v and Limit() %d, want %v and %d", i, l.Shared(), l.Limit(), reader, role.Limit)
		}
		acquired(call, l.Token(), l.Holds())
		held, lost := occupy(l, role.Section.draw(), role.Mode == writerMode)
		err = l.Unlock()
		if err != nil && !errors.Is(err, locker.ErrNotHeld) {
			return fmt.Errorf("cycle %d: %w", i, err) // the hold's end is unknown
		}
		released(held)
		dl, fixed := l.Context().Deadline()
		switch {
		case fixed && !time.Now().Before(dl):
			// A fixed lease that ran out before its Unlock returned, on a loaded machine: its hold
			// may have ended by itself, after held, as it should.
		case lost != nil:
			return fmt.Errorf("cycle %d: the lease ended while held: %w", i, lost)
		case err != nil:
			return fmt.Errorf("cycle %d: the hold was gone at Unlock, though its lease said it was held: %w", i, err)
		}
	}
	return nil
}

// occupy holds l for d, sleeping (the work: not a synchronisation), or with busy, working and
// yielding the processor, and watches its context meanwhile, every millisecond or more often.
// It returns the last reading of history.Now at which the context had not ended (the first
// reading, if it never was seen so), and the context's cause if it ended.
func occupy(l *locker.Lease, d time.Duration, busy bool) (held int64, lost error) {
	ctx := l.Context()
	held = history.Now()
	for end := held + d.Nanoseconds(); ; {
		now := history.Now()
		if ctx.Err() != nil {
			return held, context.Cause(ctx)
		}
		held = now
		switch {
		case now >= end:
			return held, nil
		case busy:
			runtime.Gosched()
		default:
			time.Sleep(min(time.Duration(end-now), time.Millisecond))
		}
	}
}

// rwInGoroutines runs rwCycles for d on one key of backend in goroutines, one per role, as
// processes 0, 1…, and returns their merged history and their errors. Each run of perClient
// roles shares a Client, made with the options of the first of them: 1 gives each its own, as
// the processes of TestMultiProcessReadersWriter, len(permitRoles) makes the processes of
// TestMultiProcessSemaphore, whose goroutines share their process's.
func rwInGoroutines(backend locker.Locker, roles []rwRole, perClient int, d time.Duration) ([]history.Op, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients := make([]*locker.Client, len(roles))
	for i, role := range roles {
		if i%perClient != 0 {
			clients[i] = clients[i-1]
			continue
		}
		clients[i] = locker.New(backend, role.options()...)
		defer clients[i].Close()
	}
	return runCycles(ctx, clients, "harness-rw", roles, 0, d)
}

// runCycles runs rwCycles for d, at most rwMaxOps times, on key in a goroutine per role, roles[i]
// through clients[i] recording as process first+i, and returns their merged history and their
// errors.
func runCycles(ctx context.Context, clients []*locker.Client, key string, roles []rwRole, first int, d time.Duration) ([]history.Op, []string) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
		recs []*history.Recorder
	)
	for i, role := range roles {
		rec := history.NewRecorder(first + i)
		recs = append(recs, rec)
		wg.Go(func() {
			if err := rwCycles(ctx, clients[i], key, role, d, rwMaxOps, rec); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("worker %d (%s): %v", first+i, role.Mode, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var ops []history.Op
	for _, r := range recs {
		ops = append(ops, r.Ops()...)
	}
	return ops, errs
}
