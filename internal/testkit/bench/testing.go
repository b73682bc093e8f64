package bench

import (
	"cmp"
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker/internal/testkit/redistest"
)

// StartRedis starts a redis-server for tb on a free loopback port, killed in tb's cleanup, and
// returns its address. Without the redis-server binary it skips tb (fails it when
// LOCKER_REQUIRE_REDIS=1), as the module's Redis tests do.
func StartRedis(tb testing.TB) string {
	tb.Helper()
	srv := redistest.StartServer(tb)
	if srv == nil {
		return ""
	}
	return srv.Addr
}

// HaveRedis reports whether StartRedis would start a server rather than skip: redis-server is
// installed, or LOCKER_REQUIRE_REDIS=1 asks for a failure without it.
func HaveRedis() bool {
	return redistest.Binary() != "" || envRequireRedis()
}

func envRequireRedis() bool { return os.Getenv(redistest.RequireEnv) == "1" }

// benchTimeout bounds one run of a scenario under Bench: a hang is a failure, not a stuck run.
const benchTimeout = 5 * time.Minute

// Bench runs scenario s on lib as benchmark b: it reports allocations, the scenario's metrics
// (round trips, handoffs/s, wait percentiles in µs, watchdog figures) with b.ReportMetric, and
// returns the result. It skips b when the scenario does not apply to lib and fails it on an
// error. When collect is not nil, the result is added to it.
func Bench(b *testing.B, s Scenario, lib Lib, cfg Config, collect *Collector) Result {
	b.Helper()
	b.ReportAllocs()
	ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
	defer cancel()
	r := &bRunner{b: b}
	res, err := s.Run(ctx, r, lib, cfg)
	r.StopTimer()
	if errors.Is(err, ErrNotApplicable) {
		b.Skipf("%s: %v", lib.Name, err)
	}
	if err != nil {
		b.Fatalf("%s %s: %v", s.Name, lib.Name, err)
	}
	if res.N > 0 {
		res.BytesPerOp = float64(r.bytes) / float64(res.N)
		res.AllocsPerOp = float64(r.mallocs) / float64(res.N)
	}
	for _, m := range res.Metrics() {
		b.ReportMetric(m.Value, m.Unit)
	}
	if collect != nil {
		collect.Add(res)
	}
	return res
}

// bRunner is a *testing.B as a Runner. It also counts allocations itself (as testing does), so
// that the Result has them.
type bRunner struct {
	b       *testing.B
	on      bool
	mem     runtime.MemStats
	mallocs uint64
	bytes   uint64
}

func (r *bRunner) N() int { return r.b.N }

func (r *bRunner) ResetTimer() {
	runtime.ReadMemStats(&r.mem)
	r.mallocs, r.bytes = 0, 0
	r.on = true
	r.b.ResetTimer()
	r.b.StartTimer()
}

func (r *bRunner) StopTimer() {
	if !r.on {
		return
	}
	r.b.StopTimer()
	r.on = false
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	r.mallocs += m.Mallocs - r.mem.Mallocs
	r.bytes += m.TotalAlloc - r.mem.TotalAlloc
}

// RunParallel runs body with b.RunParallel, with the parallelism that gives at least
// goroutines goroutines (a multiple of GOMAXPROCS).
func (r *bRunner) RunParallel(goroutines int, body func(next func() bool)) {
	p := procs()
	r.b.SetParallelism(max((goroutines+p-1)/p, 1))
	r.b.RunParallel(func(pb *testing.PB) { body(pb.Next) })
}

func procs() int { return runtime.GOMAXPROCS(0) }

// A Collector keeps the results of the benchmarks for a summary. testing runs a benchmark
// several times with a growing N and reports the last run; with -count it does so count times.
// The Collector keeps the last run of each round (a round ends when N stops growing) and
// reports, for each (scenario, lib), the round of median ns/op. It is safe for concurrent use.
type Collector struct {
	mu     sync.Mutex
	order  []string
	rounds map[string][]Result // per key, the last run of each round so far
}

// Add records res.
func (c *Collector) Add(res Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := res.Scenario + "\x00" + res.Lib
	if c.rounds == nil {
		c.rounds = make(map[string][]Result)
	}
	rs, ok := c.rounds[k]
	switch {
	case !ok:
		c.order = append(c.order, k)
		c.rounds[k] = []Result{res}
	case res.N > rs[len(rs)-1].N: // the same round, with a larger N
		rs[len(rs)-1] = res
	default: // a new round
		c.rounds[k] = append(rs, res)
	}
}

// Results returns, for each (scenario, lib) in the order they first came, the result of median
// ns/op among its rounds.
func (c *Collector) Results() []Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Result, 0, len(c.order))
	for _, k := range c.order {
		rs := slices.Clone(c.rounds[k])
		slices.SortFunc(rs, func(a, b Result) int { return cmp.Compare(a.NsPerOp, b.NsPerOp) })
		out = append(out, rs[(len(rs)-1)/2])
	}
	return out
}
