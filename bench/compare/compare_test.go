package compare_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/hashlock/locker/internal/testkit/bench"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// Every top-level benchmark starts one redis-server (on a free loopback port, killed at its
// end) and runs its scenario on it for each library: ours on go-redis and on rueidis, ours on
// PostgreSQL (one server per binary, when initdb is installed; its floor is a transaction with
// pg_advisory_xact_lock), then the peers, each with its documented defaults:
//
//   - redislock (github.com/bsm/redislock) on a go-redis client: Obtain with a 30s TTL and, to
//     wait for the lock, the retry strategy its docs recommend, ExponentialBackoff(16ms, 1s)
//     (the default, NoRetry, does not wait); Release to unlock. No re-entry, no renewal.
//   - redsync (github.com/go-redsync/redsync/v4) on its go-redis v9 pool with one server: a
//     NewMutex per Lock, with the defaults (8s expiry, 32 tries, 50–250ms random retry delay);
//     LockContext, tried again when it gives up; Unlock. No re-entry, no automatic renewal.
//   - rueidislock (github.com/redis/rueidis/rueidislock) with the settings its README gives
//     for a single Redis instance: KeyMajority 1 and NoLoopTracking (Redis >= 7.0.5); the
//     rest default (5s validity, extended every 2.5s; client-side caching wakes waiters).
//     WithContext to lock; its cancel function to unlock. No re-entry. Its waiters wait for
//     a wake-up only, with no timer, and under contention some were seen to miss theirs and
//     wait forever with the lock free; so in the contention benchmarks each WithContext is
//     bounded by rueidislockStall and tried again, and the benchmark reports how many were
//     ("stalls"). The guard costs a timer per Lock (about 7 allocations).
//
// A peer's results are compared with the floor of the driver it runs on (go-redis or
// rueidis): two EVALSHA of `return 1` through that driver, measured side by side with the
// peer's Lock+Unlock. Peers are not instrumented, so their results have no round-trip count.

var results bench.Collector

func TestMain(m *testing.M) {
	code := pgtest.Main(m) // stops the PostgreSQL server that run started, if any
	if rs := results.Results(); len(rs) > 0 {
		fmt.Println("\nSummary (median of the -count runs). floor/op: time of the floor of the library's driver over the")
		fmt.Println("library's, measured side by side (1.00 = as fast as two bare EVALSHA); allocs: of the whole process.")
		fmt.Println()
		_ = bench.WriteTable(os.Stdout, rs, false)
	}
	os.Exit(code)
}

// hold is how long the contention scenarios hold the lock (-hold=1ms); 0: bench.DefaultHold.
var hold = flag.Duration("hold", 0, "how long each contending goroutine holds the lock (default 100µs)")

// run starts a redis-server and runs the scenarios called names on every library.
func run(b *testing.B, names ...string) {
	addr := bench.StartRedis(b)
	ours, err := bench.Redis("redis://"+addr, bench.RedisOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ours = slices.DeleteFunc(ours, func(l bench.Lib) bool { return l.Name != "goredis" && l.Name != "rueidis" })
	if pgtest.Binary("initdb") != "" || os.Getenv(pgtest.RequireEnv) == "1" {
		pg, err := bench.Postgres(context.Background(), pgtest.Shared(b).URL())
		if err != nil {
			b.Fatal(err)
		}
		ours = append(ours, pg) // ours on PostgreSQL, beside the Redis libraries
	}
	for _, name := range names {
		s, ok := bench.ScenarioNamed(name)
		if !ok {
			b.Fatalf("no scenario %q", name)
		}
		// rueidislock's stall guard costs a timer per Lock: only where Lock waits.
		contended := strings.HasPrefix(name, "contention")
		libs := append(slices.Clip(ours), redislockLib(addr), redsyncLib(addr), rueidislockLib(addr, contended), counterSemaphoreLib(addr))
		for _, lib := range libs {
			if name == "floor" && lib.Name != lib.Driver {
				continue // a peer's floor is its driver's, measured once
			}
			sub := lib.Name
			if len(names) > 1 {
				sub = name + "/" + lib.Name
			}
			b.Run(sub, func(b *testing.B) {
				rueidislockStalls.Store(0)
				bench.Bench(b, s, lib, bench.Config{Hold: *hold}, &results)
				if lib.Name == "rueidislock" && contended {
					b.ReportMetric(float64(rueidislockStalls.Load()), "stalls")
				}
			})
		}
	}
}

// The round-trip floor of go-redis and rueidis: 2 × EVALSHA of `return 1`.
func BenchmarkFloor(b *testing.B) { run(b, "floor") }

// Uncontended Lock+Unlock by one goroutine.
func BenchmarkUncontended(b *testing.B) { run(b, "uncontended") }

// 8 goroutines take turns on one key, holding it 100µs: one shared client, and a client each.
func BenchmarkContention(b *testing.B) { run(b, "contention-shared", "contention-separate") }

// Fair hand-offs (a client each) and readers: only ours has them; the peers are skipped.
func BenchmarkKinds(b *testing.B) { run(b, "contention-fair", "readers", "readers-writer") }

// 16 goroutines take permits of a semaphore of 4, holding one 100µs (-hold): one shared client,
// and a client each. Only ours and the counter semaphore (counter_semaphore_test.go) have them.
func BenchmarkSemaphore(b *testing.B) { run(b, "semaphore-shared", "semaphore-separate") }

// Re-entry to depth 3: only ours re-enters; the peers are skipped.
func BenchmarkReentry(b *testing.B) { run(b, "reentry-3") }

// goredisFloor is the floor of the go-redis peers, on a go-redis client of its own made as
// theirs are.
func goredisFloor(addr string) func() (bench.FloorOp, func(), error) {
	return func() (bench.FloorOp, func(), error) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		return bench.GoredisFloor(c), func() { c.Close() }, nil
	}
}

// noContext is the Held.Context of the peers: none of them re-enters through a context.
var noContext = context.Background()

// redislock (bsm).

const redislockTTL = 30 * time.Second

func redislockLib(addr string) bench.Lib {
	return bench.Lib{
		Name:   "redislock",
		Driver: "goredis",
		Floor:  goredisFloor(addr),
		Open: func() (bench.Mutex, func(), error) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			return redislockMutex{redislock.New(c)}, func() { c.Close() }, nil
		},
	}
}

type redislockMutex struct{ c *redislock.Client }

func (m redislockMutex) Lock(ctx context.Context, key string) (bench.Held, error) {
	for {
		// A strategy counts its retries: a new one per Obtain.
		opt := &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(16*time.Millisecond, time.Second)}
		l, err := m.c.Obtain(ctx, key, redislockTTL, opt)
		switch {
		case err == nil:
			return redislockHeld{l}, nil
		case ctx.Err() != nil:
			return nil, err
		case errors.Is(err, redislock.ErrNotObtained), errors.Is(err, context.DeadlineExceeded):
			// Obtain gave up (it waits at most the TTL when ctx has no deadline): again.
		default:
			return nil, err
		}
	}
}

type redislockHeld struct{ l *redislock.Lock }

func (h redislockHeld) Context() context.Context { return noContext }
func (h redislockHeld) Unlock() error            { return h.l.Release(context.Background()) }

// redsync.

func redsyncLib(addr string) bench.Lib {
	return bench.Lib{
		Name:   "redsync",
		Driver: "goredis",
		Floor:  goredisFloor(addr),
		Open: func() (bench.Mutex, func(), error) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			return redsyncMutex{redsync.New(redsyncgoredis.NewPool(c))}, func() { c.Close() }, nil
		},
	}
}

type redsyncMutex struct{ rs *redsync.Redsync }

func (m redsyncMutex) Lock(ctx context.Context, key string) (bench.Held, error) {
	mu := m.rs.NewMutex(key)
	for {
		err := mu.LockContext(ctx)
		var taken *redsync.ErrTaken
		switch {
		case err == nil:
			return redsyncHeld{mu}, nil
		case ctx.Err() != nil:
			return nil, err
		case errors.Is(err, redsync.ErrFailed), errors.As(err, &taken):
			// It gave up after its 32 tries: again.
		default:
			return nil, err
		}
	}
}

type redsyncHeld struct{ mu *redsync.Mutex }

func (h redsyncHeld) Context() context.Context { return noContext }

func (h redsyncHeld) Unlock() error {
	ok, err := h.mu.Unlock()
	if err == nil && !ok {
		err = errors.New("redsync: not unlocked")
	}
	return err
}

// rueidislock.

// rueidislockStall bounds one WithContext call: a waiter that missed its wake-up tries again
// after it.
const rueidislockStall = time.Second

// rueidislockStalls counts the WithContext calls that rueidislockStall ended.
var rueidislockStalls atomic.Int64

// rueidislockLib returns rueidislock's Lib; with guard, Lock is bounded by rueidislockStall and
// tried again.
func rueidislockLib(addr string, guard bool) bench.Lib {
	return bench.Lib{
		Name:   "rueidislock",
		Driver: "rueidis",
		Floor: func() (bench.FloorOp, func(), error) {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
			if err != nil {
				return nil, nil, err
			}
			return bench.RueidisFloor(c), c.Close, nil
		},
		Open: func() (bench.Mutex, func(), error) {
			l, err := rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
				KeyMajority:    1,    // one Redis instance, as its README says
				NoLoopTracking: true, // Redis >= 7.0.5
			})
			if err != nil {
				return nil, nil, err
			}
			return rueidislockMutex{l, guard}, l.Close, nil
		},
	}
}

type rueidislockMutex struct {
	l     rueidislock.Locker
	guard bool
}

func (m rueidislockMutex) Lock(ctx context.Context, key string) (bench.Held, error) {
	if !m.guard {
		lctx, cancel, err := m.l.WithContext(ctx, key)
		if err != nil {
			return nil, err
		}
		return &rueidislockHeld{lctx, cancel}, nil
	}
	for {
		// A cancel after rueidislockStall, not a deadline: rueidislock would shorten the
		// lock's validity to the deadline.
		bounded, stop := context.WithCancel(ctx)
		timer := time.AfterFunc(rueidislockStall, stop)
		lctx, cancel, err := m.l.WithContext(bounded, key)
		if err == nil && timer.Stop() {
			return &rueidislockHeld{lctx, func() { cancel(); stop() }}, nil
		}
		if err == nil { // acquired just as the timer fired: its context has ended
			cancel()
		}
		stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		rueidislockStalls.Add(1)
	}
}

type rueidislockHeld struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (h *rueidislockHeld) Context() context.Context { return h.ctx }

// Unlock cancels the lock's context: rueidislock deletes its key before cancel returns.
func (h *rueidislockHeld) Unlock() error {
	h.cancel()
	return nil
}
