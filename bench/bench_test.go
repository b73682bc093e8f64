package bench_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/hashlock/locker/internal/testkit/bench"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// Run with
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// Each top-level benchmark is one scenario (two for Parallel and Contention), with a
// sub-benchmark per driver: memory first, then go-redis, go-redis with AutoPipeline, rueidis
// and Redigo on one redis-server that the benchmark starts on a free loopback port and kills at
// its end. Without redis-server only the memory backend runs (LOCKER_REQUIRE_REDIS=1 makes that
// a failure). After the benchmarks, a summary table with the ratios to the round-trip floor is
// printed.

// results collects the last result of every benchmark, for the summary table.
var results bench.Collector

func TestMain(m *testing.M) {
	code := pgtest.Main(m) // stops the PostgreSQL server that libs started, if any
	if rs := results.Results(); len(rs) > 0 {
		fmt.Println("\nSummary (median of the -count runs). floor/op, scripts/op: time of the floor's operation over the")
		fmt.Println("scenario's, measured side by side (1.00 = as fast as the floor); allocs: of the whole process.")
		fmt.Println()
		_ = bench.WriteTable(os.Stdout, rs, false)
	}
	os.Exit(code)
}

// libs returns the Libs to run: memory, postgres on the binary's PostgreSQL server (when initdb
// is installed), and, when a redis-server could be started for b, every Redis driver on it, and
// a quorum of rueidis backends on it and two more servers.
func libs(b *testing.B) []bench.Lib {
	ls := []bench.Lib{bench.Memory()}
	if pgtest.Binary("initdb") != "" || os.Getenv(pgtest.RequireEnv) == "1" {
		pg, err := bench.Postgres(context.Background(), pgtest.Shared(b).URL())
		if err != nil {
			b.Fatal(err)
		}
		ls = append(ls, pg)
	}
	if !bench.HaveRedis() {
		b.Log("redis-server not found: only the memory and postgres backends run (install redis-server, or set LOCKER_REQUIRE_REDIS=1 to fail)")
		return ls
	}
	addr := bench.StartRedis(b)
	redis, err := bench.Redis("redis://"+addr, bench.RedisOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// A quorum of three servers: this one and two more.
	q, err := bench.Quorum([]string{"redis://" + addr, "redis://" + bench.StartRedis(b), "redis://" + bench.StartRedis(b)}, bench.RedisOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return append(append(ls, redis...), q)
}

// run runs the scenarios called names, each on every Lib, as sub-benchmarks
// "<scenario>/<lib>" (or "<lib>" for one scenario).
func run(b *testing.B, names ...string) {
	ls := libs(b)
	for _, name := range names {
		s, ok := bench.ScenarioNamed(name)
		if !ok {
			b.Fatalf("no scenario %q", name)
		}
		for _, lib := range ls {
			sub := lib.Name
			if len(names) > 1 {
				sub = name + "/" + lib.Name
			}
			cfg := bench.Config{Hold: *hold, Leases: *leases, LeaseTTL: *leaseTTL}
			b.Run(sub, func(b *testing.B) { bench.Bench(b, s, lib, cfg, &results) })
		}
	}
}

// 6. The raw floor: 2 × EVALSHA of `return 1` through each driver's own script object.
func BenchmarkFloor(b *testing.B) { run(b, "floor") }

// 6b. The scripts floor: our acquire.lua and release.lua through each driver's script object,
// without the Client, measured side by side with the floor: the server's share.
func BenchmarkFloorScripts(b *testing.B) { run(b, "floor-scripts") }

// 1. Uncontended Lock+Unlock by one goroutine (latency-bound).
func BenchmarkUncontended(b *testing.B) { run(b, "uncontended") }

// 2. Parallel Lock+Unlock on distinct keys: GOMAXPROCS goroutines, and 64.
func BenchmarkParallel(b *testing.B) { run(b, "parallel-procs", "parallel-64") }

// 3. Contention: 8 goroutines on one key, holding it 100µs: with one shared Client, and with a
// Client each.
func BenchmarkContention(b *testing.B) { run(b, "contention-shared", "contention-separate") }

// hold is how long the contention scenarios hold the lock (-hold=1ms); 0: bench.DefaultHold.
var hold = flag.Duration("hold", 0, "how long each contending goroutine holds the lock (default 100µs)")

// leases and leaseTTL size the watchdog scenario (-leases=100000 -lease-ttl=3s); 0: the defaults.
var (
	leases   = flag.Int("leases", 0, "how many leases the watchdog scenario holds (default 10,000)")
	leaseTTL = flag.Duration("lease-ttl", 0, "the TTL of the watchdog scenario's leases (default 300ms)")
)

// 3a. Read-write and fair: 8 readers sharing one key (against 3's 8 writers), 8 readers and one
// writer, and 8 fair Lock calls, a Client each, every hold 100µs.
func BenchmarkKinds(b *testing.B) { run(b, "readers", "readers-writer", "contention-fair") }

// 3c. Semaphores: 16 goroutines take permits of a semaphore of 4, each holding one 100µs (-hold),
// with one shared Client and with a Client each; busy is the share of the 4 slots held.
func BenchmarkSemaphore(b *testing.B) { run(b, "semaphore-shared", "semaphore-separate") }

// 3b. Many hot keys: 1,000 keys, 4 goroutines on each, one per Client of 4, each holding its key
// 100µs; one op is one acquisition. Reports the connections per Client the server sees.
func BenchmarkManyHotKeys(b *testing.B) { run(b, "many-hot-keys") }

// 4. Re-entry depth 3: Lock, Lock, Lock, Unlock ×3.
func BenchmarkReentry(b *testing.B) { run(b, "reentry-3") }

// 5. Watchdog: 10,000 leases with a 300ms TTL; one op is one renewal tick (100ms).
func BenchmarkWatchdog(b *testing.B) { run(b, "watchdog") }
