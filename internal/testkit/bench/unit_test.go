package bench_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/testkit/bench"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, c := range []struct {
		values []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 100, 7 * time.Millisecond},
		{ms(1, 2), 50, 1 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 51, 3 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond}, // 0.99*100 is 99.00000000000001 in floats
		{ms(hundred...), 100, 100 * time.Millisecond},
		{ms(hundred...), 1, 1 * time.Millisecond},
		{ms(hundred...), 0.5, 1 * time.Millisecond},
	} {
		if got := bench.Percentile(c.values, c.p); got != c.want {
			t.Errorf("Percentile(%d values, %v) = %v, want %v", len(c.values), c.p, got, c.want)
		}
	}
}

func TestFairness(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		counts []int
		want   float64
	}{
		{[]int{5, 5, 5, 5}, 1},
		{[]int{20, 0, 0, 0}, 0.25},
		{[]int{1, 3}, 0.8}, // 16 / (2 * 10)
		{[]int{0, 0}, 0},
		{nil, 0},
	} {
		if got := bench.Fairness(c.counts); got != c.want {
			t.Errorf("Fairness(%v) = %v, want %v", c.counts, got, c.want)
		}
	}
}

func TestDur(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		812 * time.Microsecond:   "812µs",
		12345 * time.Microsecond: "12.35ms",
		1500 * time.Millisecond:  "1.50s",
	} {
		if got := bench.Dur(d); got != want {
			t.Errorf("Dur(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	rs := []bench.Result{
		{Lib: "goredis", Driver: "goredis", Scenario: "uncontended", N: 10, NsPerOp: 100_000, AllocsPerOp: 20, RoundTripsPerOp: 2, FloorRatio: 0.95, ScriptsRatio: 0.97},
		{Lib: "redislock", Driver: "goredis", Scenario: "uncontended", N: 10, NsPerOp: 125_000, FloorRatio: 0.76},
		{Lib: "goredis", Driver: "goredis", Scenario: "floor", N: 10, NsPerOp: 95_000, RoundTripsPerOp: 2, FloorRatio: 1},
		{Lib: "goredis", Driver: "goredis", Scenario: "contention-shared", Goroutines: 8, HandoffsPerSec: 5000,
			WaitP50: 800 * time.Microsecond, WaitP99: 3 * time.Millisecond, WaitMax: 4 * time.Millisecond, NsPerOp: 200_000},
		{Lib: "goredis", Driver: "goredis", Scenario: "many-hot-keys", Keys: 1000, Clients: 4, Goroutines: 4000, HandoffsPerSec: 9000,
			WaitP50: 5 * time.Millisecond, WaitP99: 20 * time.Millisecond, WaitMax: 30 * time.Millisecond, ConnsPerClient: 751.25, NsPerOp: 111_000},
		{Lib: "goredis", Driver: "goredis", Scenario: "watchdog", Leases: 10000, RenewCallsPerTick: 1, LeasesPerCall: 10000,
			CPUPerTick: 2 * time.Millisecond, NsPerOp: 100e6},
	}
	for _, md := range []bool{false, true} {
		var b strings.Builder
		if err := bench.WriteTable(&b, rs, md); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		t.Logf("markdown=%v:\n%s", md, out)
		// The floor comes first, before the uncontended results.
		if i, j := strings.Index(out, "floor "), strings.Index(out, "uncontended"); i < 0 || j < i {
			t.Errorf("floor row missing or not first")
		}
		for _, want := range []string{"0.95", "0.97", "0.76", "5000", "800µs", "3.00ms", "10000", "2.00ms", "1.00",
			"conns/client", "751.25", "9000", "20.00ms"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		if md && !strings.Contains(out, "| --- | --- | ---: |") {
			t.Errorf("markdown table lacks its separator row")
		}
	}
}

// The ratios to the floor are measured side by side: a floor that is much slower than the
// operation gives a ratio well above 1.
func TestFloorRatio(t *testing.T) {
	t.Parallel()
	mem := bench.Memory()
	lib := bench.Ours("slow-floor", "slow-floor", mem.Backend, func() (bench.FloorOp, func(), error) {
		return func(context.Context) error {
			for start := time.Now(); time.Since(start) < 2*time.Millisecond; {
			}
			return nil
		}, func() {}, nil
	})
	res, err := bench.Uncontended(context.Background(), fixed(50), lib)
	if err != nil {
		t.Fatal(err)
	}
	if res.FloorRatio < 2 || res.ScriptsRatio != 0 {
		t.Errorf("floor ratio %v (want > 2: the floor takes 2ms, Lock+Unlock on memory a few µs), scripts ratio %v (want 0: none)",
			res.FloorRatio, res.ScriptsRatio)
	}
}

func TestCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bench.Count(memory.New())
	if _, err := c.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	c.Renew(ctx, nil)
	if _, err := c.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	got := c.Calls()
	if got.Acquire != 1 || got.Release != 1 || got.Renew != 1 || got.RoundTrips() != 3 {
		t.Errorf("calls %+v, round trips %d; want one each of Acquire, Release, Renew: 3", got, got.RoundTrips())
	}
}

// fixed is a Runner of n operations that measures nothing.
type fixed int

func (f fixed) N() int    { return int(f) }
func (fixed) ResetTimer() {}
func (fixed) StopTimer()  {}
func (f fixed) RunParallel(goroutines int, body func(next func() bool)) {
	var left atomic.Int64
	left.Store(int64(f))
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() { body(func() bool { return left.Add(-1) >= 0 }) })
	}
	wg.Wait()
}

// Every scenario runs on the memory backend, small, and reports what it should.
func TestScenariosOnMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Leases of 150ms (renewed every 50ms): long enough that a loaded machine does not lose them.
	cfg := bench.Config{Goroutines: 4, Hold: 20 * time.Microsecond, Leases: 200, LeaseTTL: 150 * time.Millisecond, Keys: 10}
	for _, s := range bench.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			res, err := s.Run(ctx, fixed(40), bench.Memory(), cfg)
			if s.Name == "floor" || s.Name == "floor-scripts" {
				if !errors.Is(err, bench.ErrNotApplicable) {
					t.Fatalf("floor on memory: err %v, want ErrNotApplicable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Scenario != s.Name || res.Lib != "memory" || res.N != 40 || res.NsPerOp <= 0 {
				t.Errorf("result %+v", res)
			}
			switch s.Name {
			case "uncontended", "parallel-procs", "parallel-64":
				if res.RoundTripsPerOp != 2 {
					t.Errorf("round trips per op %v, want 2", res.RoundTripsPerOp)
				}
			case "reentry-3":
				if res.RoundTripsPerOp != 6 {
					t.Errorf("round trips per op %v, want 6", res.RoundTripsPerOp)
				}
			case "contention-shared", "contention-separate":
				// Exclusive holds never overlap: busy is a share of the run, in (0, 1].
				if res.HandoffsPerSec <= 0 || res.WaitMax < res.WaitP99 || res.WaitP99 < res.WaitP50 || res.Goroutines != 4 ||
					res.Fairness < 0.25 || res.Fairness > 1 || res.Busy <= 0 || res.Busy > 1 {
					t.Errorf("contention result %+v", res)
				}
			case "many-hot-keys":
				// Memory has no server: no connection count.
				if res.Keys != 10 || res.Clients != bench.HotKeyClients || res.Goroutines != 10*bench.HotKeyClients ||
					res.HandoffsPerSec <= 0 || res.WaitMax < res.WaitP99 || res.WaitP99 < res.WaitP50 || res.ConnsPerClient != 0 {
					t.Errorf("many-hot-keys result %+v", res)
				}
			case "watchdog":
				if res.Leases != 200 || res.LeasesPerCall <= 0 || res.RenewCallsPerTick <= 0 || res.Lost != 0 {
					t.Errorf("watchdog result %+v", res)
				}
			}
		})
	}
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	var ns []int
	res, err := bench.Measure(context.Background(), 20*time.Millisecond, func(r bench.Runner) (bench.Result, error) {
		ns = append(ns, r.N())
		r.ResetTimer()
		sink := make([][]byte, 0, r.N())
		for range r.N() {
			sink = append(sink, make([]byte, 64))
			time.Sleep(10 * time.Microsecond)
		}
		r.StopTimer()
		return bench.Result{N: r.N(), Scenario: "x", NsPerOp: float64(len(sink))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) < 2 || ns[0] != 1 {
		t.Errorf("runs with N = %v, want 1 first and then more", ns)
	}
	if res.N != ns[len(ns)-1] || res.AllocsPerOp < 1 || res.BytesPerOp < 64 {
		t.Errorf("result %+v: want the last run's N and at least one 64-byte allocation per op", res)
	}
}

func TestCollector(t *testing.T) {
	t.Parallel()
	var c bench.Collector
	add := func(lib string, n int, ns float64) {
		c.Add(bench.Result{Scenario: "s", Lib: lib, N: n, NsPerOp: ns})
	}
	// Three rounds of a: N grows within a round, and starts again at 1.
	add("a", 1, 900)
	add("a", 100, 30)
	add("b", 1, 5)
	add("a", 1, 800)
	add("a", 120, 10)
	add("a", 1, 700)
	add("a", 90, 20)
	rs := c.Results()
	if len(rs) != 2 || rs[0].Lib != "a" || rs[1].Lib != "b" {
		t.Fatalf("results %+v, want a then b", rs)
	}
	if rs[0].N != 90 || rs[0].NsPerOp != 20 {
		t.Errorf("a: %+v, want the median round (N 90, 20 ns/op)", rs[0])
	}
}

// redisLibs starts a redis-server for the test and returns every Redis driver's Lib on it; it
// skips the test with -short.
func redisLibs(t *testing.T) []bench.Lib {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	addr := bench.StartRedis(t)
	libs, err := bench.Redis("redis://"+addr, bench.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return libs
}

// Every scenario runs on every Redis driver, small, and leaves no goroutine behind.
func TestScenariosOnRedis(t *testing.T) {
	libs := redisLibs(t)
	ctx := context.Background()
	// Leases of 300ms: renewed every 100ms, so a loaded machine (go test runs packages in
	// parallel, some of them burning CPU) does not make renewals late enough to lose them.
	cfg := bench.Config{Goroutines: 4, Hold: 20 * time.Microsecond, Leases: 300, LeaseTTL: 300 * time.Millisecond, Keys: 10}
	before := runtime.NumGoroutine()
	for _, lib := range libs {
		for _, s := range bench.Scenarios() {
			res, err := s.Run(ctx, fixed(8), lib, cfg)
			if err != nil {
				t.Fatalf("%s %s: %v", s.Name, lib.Name, err)
			}
			if res.N != 8 || res.NsPerOp <= 0 || res.Scenario != s.Name {
				t.Errorf("%s %s: result %+v", s.Name, lib.Name, res)
			}
			if s.Name == "watchdog" && (res.Lost != 0 || res.RenewCallsPerTick <= 0) {
				t.Errorf("%s %s: result %+v", s.Name, lib.Name, res)
			}
		}
	}
	// Clients, pools and subscriptions close asynchronously in places: give them a moment.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// Many hot keys on every Redis driver, small: every goroutine (one per Client and key) gets its
// key, no two hold one key at once, and the server's connections per Client are counted.
func TestManyHotKeysOnRedis(t *testing.T) {
	libs := redisLibs(t)
	const keys = 20
	cfg := bench.Config{Hold: 20 * time.Microsecond, Keys: keys}
	goroutines := keys * bench.HotKeyClients
	for _, lib := range libs {
		var c holdChecker
		res, err := bench.ManyHotKeys(context.Background(), fixed(5*goroutines), c.wrap(lib), cfg)
		if err != nil {
			t.Fatalf("%s: %v", lib.Name, err)
		}
		if res.N != 5*goroutines || res.Keys != keys || res.Clients != bench.HotKeyClients || res.Goroutines != goroutines ||
			res.HandoffsPerSec <= 0 || res.WaitMax < res.WaitP99 || res.WaitP99 < res.WaitP50 || res.RoundTripsPerOp < 2 {
			t.Errorf("%s: result %+v", lib.Name, res)
		}
		// Each Client dialled connections of its own after the baseline was counted.
		if res.ConnsPerClient <= 0 {
			t.Errorf("%s: %v connections per Client, want > 0", lib.Name, res.ConnsPerClient)
		}
		// Release notices: at most 4 pub/sub connections per Client (one server). (A short run
		// may close them between two samples: no lower bound.)
		if res.PubSubConnsPerClient > 4 {
			t.Errorf("%s: %v pub/sub connections per Client, want at most 4", lib.Name, res.PubSubConnsPerClient)
		}
		c.mu.Lock()
		if c.overlaps > 0 {
			t.Errorf("%s: %d acquisitions of a key that another goroutine held", lib.Name, c.overlaps)
		}
		// The warm-up acquires one key on every Client; the run itself, every (Client, key).
		if len(c.acquired) != goroutines {
			t.Errorf("%s: %d of the %d goroutines acquired their key", lib.Name, len(c.acquired), goroutines)
		}
		c.mu.Unlock()
	}
}

// holdChecker wraps a Lib's clients to count, per (client, key), the acquisitions, and the
// acquisitions of a key that some other hold had not released.
type holdChecker struct {
	mu       sync.Mutex
	clients  int
	held     map[string]int
	acquired map[string]int // by client number and key
	overlaps int
}

func (c *holdChecker) wrap(lib bench.Lib) bench.Lib {
	c.held, c.acquired = make(map[string]int), make(map[string]int)
	open := lib.Open
	lib.Open = func() (bench.Mutex, func(), error) {
		m, done, err := open()
		if err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		c.clients++
		id := c.clients
		c.mu.Unlock()
		return &checkedMutex{m: m, c: c, id: id}, done, nil
	}
	return lib
}

// warmUps is the Lock+Unlock calls with which a scenario warms up each client (bench's warmOps).
const warmUps = 3

type checkedMutex struct {
	m  bench.Mutex
	c  *holdChecker
	id int
	// warm counts the client's acquisitions: the first warmUps are the scenario's warm-up (on
	// one key, before the run), left out of acquired.
	warm atomic.Int32
}

func (m *checkedMutex) Lock(ctx context.Context, key string) (bench.Held, error) {
	h, err := m.m.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.held[key]++
	if m.c.held[key] > 1 {
		m.c.overlaps++
	}
	if m.warm.Add(1) > warmUps {
		m.c.acquired[fmt.Sprint(m.id, " ", key)]++
	}
	return &checkedHeld{Held: h, c: m.c, key: key}, nil
}

// Calls forwards the backend calls the client counted, so that the round trips are reported.
func (m *checkedMutex) Calls() bench.Calls { return m.m.(interface{ Calls() bench.Calls }).Calls() }

type checkedHeld struct {
	bench.Held
	c   *holdChecker
	key string
}

func (h *checkedHeld) Unlock() error {
	h.c.mu.Lock()
	h.c.held[h.key]--
	h.c.mu.Unlock()
	return h.Held.Unlock()
}
