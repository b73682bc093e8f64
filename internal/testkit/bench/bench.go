// Package bench measures the locker module against its round-trip floor and against the
// libraries people pick instead.
//
// A scenario (Floor, ScriptsFloor, Uncontended, Parallel, Contention, ManyHotKeys, Reentry,
// Watchdog) is a function of a Runner and a Lib. The Runner is either a *testing.B (see Bench,
// for the Go benchmarks in bench/ and in the comparison module bench/compare) or a time budget
// (see Measure, for the `locker bench` command); a Lib is one lock library on one driver — ours
// on memory, go-redis, rueidis, Redigo or valkey-go (Memory, Redis), or a peer library that the
// comparison module wraps. Every scenario does its set-up and warm-up before Runner.ResetTimer and its tear-down
// after Runner.StopTimer, so what is measured is the scenario's loop alone.
//
// Round trips are counted by a locker.Locker decorator (Counter) under our Client: every backend
// call is one round trip (Renew is one pipeline, whatever the size of its batch). Peer libraries
// are not instrumented, so their results carry no round-trip count.
//
// See bench/README.md for what each scenario measures and how to run them.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker"
)

// ErrNotApplicable is returned by a scenario that does not apply to a Lib: re-entry of a
// library without it, the watchdog of a peer, the floor of the memory backend. Bench skips the
// benchmark; Measure's callers leave the result out.
var ErrNotApplicable = errors.New("bench: scenario does not apply to this library")

// A Mutex is one client of a lock library: our locker.Client, or a peer library's.
type Mutex interface {
	// Lock waits until it holds key (or ctx ends) and returns the hold.
	Lock(ctx context.Context, key string) (Held, error)
}

// Held is one hold returned by Mutex.Lock. *locker.Lease implements it.
type Held interface {
	// Context is the hold's context: for a reentrant library, Lock with it re-enters.
	Context() context.Context
	// Unlock releases the hold.
	Unlock() error
}

// A FloorOp is one operation of a floor: two EVALSHA calls through the driver's own script
// object — of `return 1` for Lib.Floor, of our acquire and release scripts for
// Lib.ScriptFloor.
type FloorOp func(ctx context.Context) error

// A ConnCount returns the connections of the server's clients, its own included.
type ConnCount func(ctx context.Context) (Conns, error)

// Conns counts a server's client connections.
type Conns struct {
	All    int // INFO clients' connected_clients
	PubSub int // those in pub/sub mode: CLIENT LIST TYPE pubsub
}

// A Lib is one lock library on one driver: how to make clients of it.
type Lib struct {
	// Name names the library and driver in results: "goredis", "rueidis", "redislock"…
	Name string
	// Driver names the Redis driver underneath, whose floor the results are compared with:
	// "goredis", "goredis-autopipeline", "rueidis", "redigo" ("memory" for the memory backend).
	Driver string
	// Reentrant reports whether Lock with a Held's Context re-enters the lock.
	Reentrant bool
	// Open returns a new client with connections of its own, and the function that closes it.
	Open func() (Mutex, func(), error)
	// Floor, when not nil, returns the raw floor's operation on connections of its own, and
	// the function that closes them.
	Floor func() (FloorOp, func(), error)
	// ScriptFloor, when not nil, is like Floor but its operation runs our two scripts —
	// acquire.lua and release.lua, as the backend sends them — instead of `return 1`: the
	// server's share of a Lock+Unlock, without the Client.
	ScriptFloor func() (FloorOp, func(), error)
	// Backend, when not nil, returns a fresh backend of ours (for the watchdog scenario), and
	// the function that closes its connections.
	Backend func() (locker.Locker, func(), error)
	// ServerConns, when not nil, returns a ConnCount of the server the clients talk to, on a
	// connection of its own, and the function that closes it (for the connections per Client
	// of the many-hot-keys scenario; nil for the memory backend, which has no server).
	ServerConns func() (ConnCount, func(), error)

	opts []locker.Option // the options of our Clients (Ours, WithClientOptions)
}

// A Runner runs a scenario's measured loop: a *testing.B (through Bench), or a time budget
// (through Measure).
type Runner interface {
	// N is the number of operations to run.
	N() int
	// ResetTimer starts the measurement afresh: time and allocations from here on count.
	ResetTimer()
	// StopTimer stops the measurement.
	StopTimer()
	// RunParallel runs body in about goroutines goroutines (testing.B's RunParallel rounds
	// up to a multiple of GOMAXPROCS) until N operations were done in all: each call of next
	// that returns true is one operation.
	RunParallel(goroutines int, body func(next func() bool))
}

// Config holds the parameters of the scenarios; the zero Config means the defaults.
type Config struct {
	// Goroutines is the number of goroutines of the contention scenarios (default 8).
	Goroutines int `json:"goroutines"`
	// Hold is how long a contending goroutine holds the lock, busy (default 100µs): a
	// time.Sleep that short sleeps about a millisecond on Linux.
	Hold time.Duration `json:"hold_ns"`
	// Leases is the number of leases the watchdog scenario holds (default 10,000).
	Leases int `json:"leases"`
	// LeaseTTL is their TTL (default 300ms): the watchdog renews every LeaseTTL/3.
	LeaseTTL time.Duration `json:"lease_ttl_ns"`
	// Keys is the number of keys of the many-hot-keys scenario (default 1,000), each contended
	// by HotKeyClients goroutines.
	Keys int `json:"keys"`
}

// Defaults of Config.
const (
	DefaultGoroutines = 8
	DefaultHold       = 100 * time.Microsecond
	DefaultLeases     = 10_000
	DefaultLeaseTTL   = 300 * time.Millisecond
	DefaultKeys       = 1000
)

func (c Config) withDefaults() Config {
	if c.Goroutines <= 0 {
		c.Goroutines = DefaultGoroutines
	}
	if c.Hold <= 0 {
		c.Hold = DefaultHold
	}
	if c.Leases <= 0 {
		c.Leases = DefaultLeases
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Keys <= 0 {
		c.Keys = DefaultKeys
	}
	return c
}

// Result is what one scenario measured for one Lib. Fields that do not apply are zero.
type Result struct {
	Lib      string `json:"lib"`
	Driver   string `json:"driver"`
	Scenario string `json:"scenario"`

	N       int           `json:"n"`          // operations measured
	Elapsed time.Duration `json:"elapsed_ns"` // their wall time
	NsPerOp float64       `json:"ns_per_op"`
	// BytesPerOp and AllocsPerOp are the heap allocations per operation (of the whole
	// process, as testing's -benchmem counts them).
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// RoundTripsPerOp is the number of backend calls per operation (ours only; 0 for peers).
	RoundTripsPerOp float64 `json:"roundtrips_per_op,omitempty"`
	// FloorRatio is the time of the floor's operation divided by this result's (1 = as fast as
	// two bare EVALSHAs through the same driver), for the latency-bound scenarios of a Lib with
	// a Floor. It is measured side by side — blocks of the two operations alternate, after the
	// timed loop — so that a change in the machine's load affects both alike.
	FloorRatio float64 `json:"floor_ratio,omitempty"`
	// ScriptsRatio is the same with the scripts floor (our two scripts, without the Client).
	ScriptsRatio float64 `json:"scripts_ratio,omitempty"`

	// Goroutines is the number of goroutines of the parallel and contention scenarios.
	Goroutines int `json:"goroutines,omitempty"`

	// Contention: acquisitions per second; the wait of each Lock (call to acquisition); and
	// Jain's fairness index of the goroutines' shares of the acquisitions (1: equal shares;
	// 1/Goroutines: one goroutine took them all). A lock that lets the goroutine that just
	// unlocked take it again at once has short waits for most acquisitions — those of that
	// goroutine — and long ones for the rest: look at the maximum and the fairness too.
	HandoffsPerSec float64 `json:"handoffs_per_sec,omitempty"`
	// Busy is the share of the run's time during which the lock was held, from each
	// acquisition to its Unlock call (1.0: never idle, the limit); with readers, whose holds
	// overlap, the mean number of holders.
	Busy     float64       `json:"busy,omitempty"`
	WaitP50  time.Duration `json:"wait_p50_ns,omitempty"`
	WaitP99  time.Duration `json:"wait_p99_ns,omitempty"`
	WaitMax  time.Duration `json:"wait_max_ns,omitempty"`
	Fairness float64       `json:"fairness,omitempty"`
	// Readers and a writer: the writer's acquisitions.
	Writes int `json:"writes,omitempty"`
	// Readers: their acquisitions per second over those of as many writers with the same hold.
	Speedup float64 `json:"speedup,omitempty"`

	// Many hot keys: the keys and the Clients (Goroutines is their product), and the server
	// connections per Client — the peak of the server's count during the run less its count
	// before the Clients were opened, over Clients (0 when the Lib cannot count them) — all of
	// them, and those in pub/sub mode (the release notices').
	Keys                 int     `json:"keys,omitempty"`
	Clients              int     `json:"clients,omitempty"`
	ConnsPerClient       float64 `json:"conns_per_client,omitempty"`
	PubSubConnsPerClient float64 `json:"pubsub_conns_per_client,omitempty"`

	// Watchdog: Leases held; per tick (one renewal of every lease), Renew calls (each one
	// pipeline, so round trips) and process CPU time (user+system, -1 when unknown); leases
	// per Renew call; leases lost during the measurement; heap per lease.
	Leases            int           `json:"leases,omitempty"`
	RenewCallsPerTick float64       `json:"renew_calls_per_tick,omitempty"`
	CPUPerTick        time.Duration `json:"cpu_per_tick_ns,omitempty"`
	LeasesPerCall     float64       `json:"leases_per_call,omitempty"`
	Lost              int           `json:"lost"`
	// BytesPerLease is the Go heap the Client (and its backend) keeps per held lease: live
	// heap after the leases were taken less before, over Leases.
	BytesPerLease float64 `json:"bytes_per_lease,omitempty"`
}

// A Metric is one value for testing.B.ReportMetric.
type Metric struct {
	Value float64
	Unit  string
}

// Metrics returns the result's scenario-specific values, as the Go benchmarks report them.
func (r Result) Metrics() []Metric {
	var ms []Metric
	if r.RoundTripsPerOp > 0 {
		ms = append(ms, Metric{r.RoundTripsPerOp, "roundtrips/op"})
	}
	if r.FloorRatio > 0 {
		ms = append(ms, Metric{r.FloorRatio, "floor/op"})
	}
	if r.ScriptsRatio > 0 {
		ms = append(ms, Metric{r.ScriptsRatio, "scripts/op"})
	}
	if r.HandoffsPerSec > 0 {
		ms = append(ms,
			Metric{r.HandoffsPerSec, "handoffs/s"},
			Metric{r.Busy, "busy"},
			Metric{micros(r.WaitP50), "wait-p50-µs"},
			Metric{micros(r.WaitP99), "wait-p99-µs"},
			Metric{micros(r.WaitMax), "wait-max-µs"},
			Metric{r.Fairness, "fairness"})
	}
	if r.Writes > 0 {
		ms = append(ms, Metric{float64(r.Writes), "writes"})
	}
	if r.Speedup > 0 {
		ms = append(ms, Metric{r.Speedup, "speedup"})
	}
	if r.ConnsPerClient != 0 {
		ms = append(ms, Metric{r.ConnsPerClient, "conns/client"}, Metric{r.PubSubConnsPerClient, "pubsub-conns/client"})
	}
	if r.Leases > 0 {
		ms = append(ms,
			Metric{r.RenewCallsPerTick, "roundtrips/tick"},
			Metric{r.LeasesPerCall, "leases/call"},
			Metric{float64(r.Lost), "lost-leases"},
			Metric{r.BytesPerLease, "B/lease"})
		if r.CPUPerTick >= 0 {
			ms = append(ms, Metric{micros(r.CPUPerTick), "cpu-µs/tick"})
		}
	}
	return ms
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// newResult starts the result of scenario for lib: n operations in elapsed.
func newResult(lib Lib, scenario string, n int, elapsed time.Duration) Result {
	r := Result{Lib: lib.Name, Driver: lib.Driver, Scenario: scenario, N: n, Elapsed: elapsed}
	if n > 0 {
		r.NsPerOp = float64(elapsed) / float64(n)
	}
	return r
}

// A Scenario is one of the measurements, by name.
type Scenario struct {
	Name    string // "floor", "uncontended", "parallel-procs"…
	Summary string // one line
	Run     func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error)
}

// Scenarios returns every scenario, in the order of the tables.
func Scenarios() []Scenario {
	ss := []Scenario{
		{"floor", "2 × EVALSHA of `return 1` through the driver's own script object: the round-trip floor",
			func(ctx context.Context, r Runner, lib Lib, _ Config) (Result, error) { return Floor(ctx, r, lib) }},
		{"floor-scripts", "2 × EVALSHA of our acquire.lua and release.lua through the driver's script object, without the Client",
			func(ctx context.Context, r Runner, lib Lib, _ Config) (Result, error) {
				return ScriptsFloor(ctx, r, lib)
			}},
		{"uncontended", "Lock+Unlock of one key by one goroutine (latency-bound)",
			func(ctx context.Context, r Runner, lib Lib, _ Config) (Result, error) {
				return Uncontended(ctx, r, lib)
			}},
		{"parallel-procs", "Lock+Unlock on distinct keys, GOMAXPROCS goroutines, one shared client",
			func(ctx context.Context, r Runner, lib Lib, _ Config) (Result, error) {
				return Parallel(ctx, r, lib, runtime.GOMAXPROCS(0))
			}},
		{"parallel-64", "Lock+Unlock on distinct keys, 64 goroutines, one shared client",
			func(ctx context.Context, r Runner, lib Lib, _ Config) (Result, error) {
				return Parallel(ctx, r, lib, 64)
			}},
		{"contention-shared", "N goroutines take turns on one key with a short hold, one shared client",
			func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
				return Contention(ctx, r, lib, cfg, true)
			}},
		{"contention-separate", "N goroutines take turns on one key with a short hold, a client each (as processes would)",
			func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
				return Contention(ctx, r, lib, cfg, false)
			}},
		{"contention-fair", "N goroutines take turns on one key with a short hold, a client each, every Lock fair (WithFair)",
			FairContention},
		{"semaphore-shared", "16 goroutines (or N) take permits of a semaphore of 4 with a short hold, one shared client: busy is the share of the 4 slots held",
			func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
				return Semaphore(ctx, r, lib, cfg, true)
			}},
		{"semaphore-separate", "16 goroutines (or N) take permits of a semaphore of 4 with a short hold, a client each: busy is the share of the 4 slots held",
			func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
				return Semaphore(ctx, r, lib, cfg, false)
			}},
		{"readers", "N readers share one key, a client each, holding it by sleeping; then N writers with the same hold: the speedup",
			Readers},
		{"readers-writer", "N readers and one writer on one key, a client each, holding it by sleeping: is the writer starved?",
			ReadersWriter},
		{"many-hot-keys", "1,000 keys (by default), 4 goroutines on each with a short hold, one per Client of 4: waits, and server connections per Client",
			func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
				return ManyHotKeys(ctx, r, lib, cfg)
			}},
		{"reentry-3", "Lock, Lock, Lock (re-entering through the lease's context), Unlock ×3",
			func(ctx context.Context, r Runner, lib Lib, _ Config) (Result, error) { return Reentry(ctx, r, lib) }},
		{"watchdog", "10,000 leases held with a 300ms TTL: round trips and CPU per renewal tick",
			func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
				return Watchdog(ctx, r, lib, cfg)
			}},
	}
	for i := range ss {
		name, run := ss[i].Name, ss[i].Run
		ss[i].Run = func(ctx context.Context, r Runner, lib Lib, cfg Config) (Result, error) {
			res, err := run(ctx, r, lib, cfg)
			res.Scenario = name
			return res, err
		}
	}
	return ss
}

// ScenarioNamed returns the scenario called name.
func ScenarioNamed(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Measure runs a scenario as `go test -bench` would with -benchtime budget: first with N = 1,
// then with an N predicted from the previous run, until a run took at least budget, or ctx
// has ended after a run (a run that ctx interrupts returns its error). It returns the last
// run's result, with the allocations per operation filled in.
func Measure(ctx context.Context, budget time.Duration, run func(r Runner) (Result, error)) (Result, error) {
	n := 1
	for {
		t := &timer{n: n}
		res, err := run(t)
		t.StopTimer()
		if err != nil {
			return res, err
		}
		t.fill(&res)
		if t.elapsed >= budget || n >= maxN || ctx.Err() != nil {
			return res, nil
		}
		prev := n
		// Aim 20% over the budget, grow at least by one and at most a hundredfold.
		predicted := float64(budget) * 1.2 * float64(n) / float64(max(t.elapsed, time.Microsecond))
		n = int(min(max(predicted, float64(prev+1)), float64(prev)*100, maxN))
	}
}

const maxN = 1_000_000_000

// timer is Measure's Runner.
type timer struct {
	n       int
	on      bool
	start   time.Time
	elapsed time.Duration
	mem     runtime.MemStats // at the last ResetTimer
	mallocs uint64
	bytes   uint64
}

func (t *timer) N() int { return t.n }

func (t *timer) ResetTimer() {
	runtime.ReadMemStats(&t.mem)
	t.elapsed, t.mallocs, t.bytes = 0, 0, 0
	t.on = true
	t.start = time.Now()
}

func (t *timer) StopTimer() {
	if !t.on {
		return
	}
	t.elapsed += time.Since(t.start)
	t.on = false
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	t.mallocs += m.Mallocs - t.mem.Mallocs
	t.bytes += m.TotalAlloc - t.mem.TotalAlloc
}

func (t *timer) RunParallel(goroutines int, body func(next func() bool)) {
	var left atomic.Int64
	left.Store(int64(t.n))
	next := func() bool { return left.Add(-1) >= 0 }
	var wg sync.WaitGroup
	for range max(goroutines, 1) {
		wg.Go(func() { body(next) })
	}
	wg.Wait()
}

// fill sets the allocations per operation of res.
func (t *timer) fill(res *Result) {
	if t.n > 0 {
		res.BytesPerOp = float64(t.bytes) / float64(t.n)
		res.AllocsPerOp = float64(t.mallocs) / float64(t.n)
	}
}

// newKey returns a key of its own for one run of a scenario.
func newKey(scenario string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bench:" + scenario + ":" + hex.EncodeToString(b[:])
}
