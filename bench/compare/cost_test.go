//go:build linux

package compare_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/bench"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// TestCost measures what one uncontended Lock+Unlock costs on CPU — the client's and the
// redis-server's — for ours (go-redis, rueidis, Redigo, valkey-go) and for every peer, side by
// side on one spawned redis-server, and, for ours, what the watchdog costs the server per
// renewed lease. Run it alone (it needs the machine quiet, and -v to print its tables):
//
//	go test -run TestCost -v -count=1 .
//
// It skips under -short, and without redis-server (fails with LOCKER_REQUIRE_REDIS=1). Linux
// only: the server's CPU is read from /proc. Unless -cost.cpu=-1, the test process and the
// server run on one CPU, the last the process may use (see pin): their figures then hold from
// run to run; GOMAXPROCS keeps its value.
//
// Uncontended: one goroutine locks and unlocks 64 keys in turn (key i%64 at op i). Every
// library — and, for reference, the floors: two EVALSHA of `return 1` through go-redis and
// rueidis — runs blocks of -cost.ops ops in turn, -cost.rounds rounds, each round starting one
// library further on; every figure is a median over the rounds of that library's per-op value
// in its block:
//
//   - wall: the block's wall time over its ops.
//   - client CPU: the test process's user+system time (getrusage RUSAGE_SELF) over the block,
//     per op. It is the whole process, GC included; nothing else runs during a block.
//   - server CPU: the redis-server main thread's time on CPU (first field of
//     /proc/PID/task/PID/schedstat) over the block, per op: commands, event loop, network
//     system calls and its cron (its idle rate is printed). Keys' active expiry is off during
//     the blocks (DEBUG SET-ACTIVE-EXPIRE 0); what the keys a library leaves cost when they
//     expire is measured afterwards (expiry, below).
//   - in scripts: the usec of eval, evalsha, eval_ro, evalsha_ro, fcall and fcall_ro in INFO
//     commandstats over the block, per op (the commands a script calls included).
//   - cmds: the calls of every command in INFO commandstats over the block, per op, but the
//     harness's (info, echo, debug) and ping (idle rueidis connections ping every second);
//     a command a script calls counts once, and so does the script call.
//   - script cmds: cmds less those a client sent, per op, counted by MONITOR over one
//     block of 64 ops (MONITOR tells a script's commands by their "lua" client) before the
//     timed rounds.
//   - keys left: keys in the database after the block less before, per op (ours: its
//     Unlock's marker, which lives 5s).
//   - expiry: the server CPU per key left when active expiry is turned back on at the end
//     (idle rate deducted), times keys left per op.
//
// Watchdog (ours only, -cost.watchdog): a Client with a -cost.lease-ttl TTL holds
// -cost.leases leases, renewed every TTL/3; over -cost.windows windows of one second, the
// server CPU (its idle rate deducted), script time, commands and client CPU per renewed lease
// (leases in the Renew batches), median of the windows. Peers have no watchdog (rueidislock
// extends its keys itself, uncounted): none is measured.
//
// Script time is commandstats' usec: the time from a command's start to its end, so a server
// thread preempted inside a script (2 cores shared with the client) counts the wait too; it
// can exceed the server's CPU.
//
// rueidislock runs with the stall guard of the contention benchmarks (rueidislockStall, about
// 0.4µs of client CPU a Lock): an acquisition that takes over its 20ms try timeout (a hiccup of
// the VM) leaves its key behind and waits for a notice that, with active expiry off, never
// comes; the guard tries again, and the key, past its 5s validity, is expired by that access.
//
// With -cost.benchfmt it also prints one line per block in the format of Go benchmarks
// (server-us/op, script-us/op, cmds/op, inner-cmds/op, client-us/op), for benchstat.
func TestCost(t *testing.T) {
	if testing.Short() {
		t.Skip("TestCost takes about 30s: not under -short")
	}
	srv := redistest.StartServer(t)
	if srv == nil {
		return
	}
	where := "free to run on any CPU"
	if cpu := pinTarget(t); cpu >= 0 {
		pin(t, cpu, srv.PID())
		where = fmt.Sprintf("both on CPU %d, GOMAXPROCS %d", cpu, runtime.GOMAXPROCS(0))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a hang fails, and says where
	defer cancel()
	st := newCostStats(t, srv)

	ours, err := bench.Redis("redis://"+srv.Addr, bench.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours = slices.DeleteFunc(ours, func(l bench.Lib) bool { return l.Name == "goredis-autopipeline" })
	libs := append(slices.Clip(ours), redislockLib(srv.Addr), redsyncLib(srv.Addr), rueidislockLib(srv.Addr, true))
	rueidislockStalls.Store(0)
	var entries []*costEntry
	for _, lib := range libs {
		m, done, err := lib.Open()
		if err != nil {
			t.Fatalf("%s: %v", lib.Name, err)
		}
		t.Cleanup(done)
		entries = append(entries, mutexEntry(lib.Name, m))
	}
	for _, lib := range []bench.Lib{ours[0], rueidislockLib(srv.Addr, false)} {
		f, done, err := lib.Floor()
		if err != nil {
			t.Fatalf("floor of %s: %v", lib.Driver, err)
		}
		t.Cleanup(done)
		entries = append(entries, &costEntry{name: "floor " + lib.Driver,
			op: func(ctx context.Context, _ int) error { return f(ctx) }})
	}

	for _, e := range entries {
		if err := e.run(ctx, 0, 2*costKeys); err != nil { // dial, load scripts, touch every key
			t.Fatalf("%s: warm-up: %v", e.name, err)
		}
	}
	for _, e := range entries {
		if err := st.monitor(ctx, e); err != nil {
			t.Fatalf("%s: MONITOR: %v", e.name, err)
		}
	}
	st.do(ctx, "DEBUG", "SET-ACTIVE-EXPIRE", "0")
	idle := st.idleRate(ctx, time.Second)

	ops := *costOps
	for round := range *costRounds {
		for i := range entries {
			e := entries[(round+i)%len(entries)]
			f, err := st.block(ctx, e, round*ops, ops)
			if err != nil {
				t.Fatalf("%s: %v", e.name, err)
			}
			e.figs = append(e.figs, f)
			if *costBenchFmt {
				fmt.Printf("BenchmarkCost/uncontended/%s %d %.0f ns/op %.2f server-us/op %.2f script-us/op %.2f cmds/op %.2f inner-cmds/op %.2f client-us/op\n",
					strings.ReplaceAll(e.name, " ", "-"), ops, f.wall*1e3, f.server, f.script, f.cmds, f.cmds-e.top, f.client)
			}
		}
	}

	var wd []watchdogFig
	if *costWatchdog {
		for _, lib := range ours {
			f, err := st.watchdog(ctx, lib, idle)
			if err != nil {
				t.Fatalf("%s watchdog: %v", lib.Name, err)
			}
			wd = append(wd, f)
		}
	}
	perKey := st.expiry(ctx, idle)

	fmt.Printf("\nUncontended Lock+Unlock on %s (redis-server %s; client and server %s), one goroutine, 64 keys;\nmedians of %d rounds of %d ops per library.\n",
		srv.Addr, st.version, where, *costRounds, ops)
	fmt.Printf("Idle server: %.0f µs of CPU per second. Expiry: %s of server CPU per key left.\n\n", idle, perKeyString(perKey))
	writeCostTable(os.Stdout, entries, perKey)
	if n := rueidislockStalls.Load(); n > 0 {
		fmt.Printf("rueidislock stalled %d times (its guard ended a WithContext after %v): see the spread.\n", n, rueidislockStall)
	}
	fmt.Println("\nSpread (min–max over the rounds):")
	writeCostSpread(os.Stdout, entries)
	fmt.Println("\nCommands per op (MONITOR, one block of 64 ops): sent by the client | called by its scripts")
	for _, e := range entries {
		fmt.Printf("  %-16s %s | %s\n", e.name, perOp(e.sent, costKeys), perOp(e.lua, costKeys))
	}
	if len(wd) > 0 {
		fmt.Printf("\nWatchdog: %d leases, %v TTL, renewed every %v; medians of %d windows of 1s.\n\n",
			*costLeases, *costLeaseTTL, *costLeaseTTL/3, *costWindows)
		writeWatchdogTable(os.Stdout, wd)
	}
}

var (
	costRounds   = flag.Int("cost.rounds", 15, "TestCost: rounds of blocks (every library once a round)")
	costOps      = flag.Int("cost.ops", 1000, "TestCost: Lock+Unlock per block")
	costBenchFmt = flag.Bool("cost.benchfmt", false, "TestCost: print every block as a Go benchmark line, for benchstat")
	costWatchdog = flag.Bool("cost.watchdog", true, "TestCost: measure the watchdog's renewals (ours)")
	costLeases   = flag.Int("cost.leases", 1000, "TestCost: leases the watchdog renews")
	costLeaseTTL = flag.Duration("cost.lease-ttl", 300*time.Millisecond, "TestCost: the watchdog's lease TTL")
	costWindows  = flag.Int("cost.windows", 3, "TestCost: one-second windows of the watchdog's measurement")
	costCPU      = flag.Int("cost.cpu", -2, "TestCost: the CPU to pin the test process and redis-server to; -1: none; -2: the last one the process may use")
)

// pinTarget returns the CPU -cost.cpu names (the last one the process may run on for -2), or
// -1 for none.
func pinTarget(t *testing.T) int {
	if *costCPU != -2 {
		return *costCPU
	}
	set, err := getAffinity(0)
	if err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	for cpu := len(set)*64 - 1; cpu >= 0; cpu-- {
		if set[cpu/64]&(1<<(cpu%64)) != 0 {
			return cpu
		}
	}
	return -1
}

// cpuSet is a CPU mask for sched_setaffinity: 1,024 CPUs.
type cpuSet [16]uint64

func getAffinity(tid int) (cpuSet, error) {
	var set cpuSet
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(tid), unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set)))
	if e != 0 {
		return set, e
	}
	return set, nil
}

func setAffinity(tid int, set cpuSet) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set)))
	if e != 0 {
		return e
	}
	return nil
}

// setTasks sets the affinity of every thread of process pid ("self" for this one), twice over:
// a thread created during the first pass from one not yet set is caught by the second.
func setTasks(pid string, set cpuSet) error {
	for range 2 {
		tasks, err := os.ReadDir("/proc/" + pid + "/task")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := setAffinity(tid, set); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// pin runs every thread of this process, and of the redis-server whose PID is server, on cpu
// alone, until t's cleanup gives this process's threads back the affinity it had (the server
// is killed). Threads created meanwhile inherit it. GOMAXPROCS keeps its value: the Go runtime
// keeps its Ps, as a user's client would, on one CPU.
//
// On this 2-vCPU VM a request that wakes a process on the other vCPU costs, at times, several
// times as much CPU as at others (both sides, tens of µs per round trip): on one CPU the
// figures hold within about 10% from run to run.
func pin(t *testing.T, cpu, server int) {
	was, err := getAffinity(0)
	if err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	var set cpuSet
	if cpu < 0 || cpu >= len(set)*64 {
		t.Fatalf("-cost.cpu=%d: no such CPU", cpu)
	}
	set[cpu/64] = 1 << (cpu % 64)
	t.Cleanup(func() {
		if err := setTasks("self", was); err != nil {
			t.Errorf("restoring the affinity: %v", err)
		}
	})
	if err := setTasks("self", set); err != nil {
		t.Fatalf("pinning to CPU %d: %v", cpu, err)
	}
	if err := setTasks(strconv.Itoa(server), set); err != nil {
		t.Fatalf("pinning redis-server to CPU %d: %v", cpu, err)
	}
}

// costKeys is the number of keys an uncontended library locks in turn.
const costKeys = 64

// costEntry is one row of the table: a library (or a floor) and what was measured of it.
type costEntry struct {
	name string
	op   func(ctx context.Context, i int) error // the i-th operation
	figs []costFig                              // one per block
	// From the MONITOR pass: commands per op sent by the client (top) and, per name, the
	// commands sent (sent) and called by scripts (lua), in costKeys ops.
	top       float64
	sent, lua map[string]int
}

// mutexEntry is the entry of a lock: op i locks key i%costKeys of its own and unlocks it.
func mutexEntry(name string, m bench.Mutex) *costEntry {
	keys := make([]string, costKeys)
	for i := range keys {
		keys[i] = "cost:" + name + ":" + strconv.Itoa(i)
	}
	return &costEntry{name: name, op: func(ctx context.Context, i int) error {
		h, err := m.Lock(ctx, keys[i%costKeys])
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := h.Unlock(); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	}}
}

// run runs ops from..from+n-1.
func (e *costEntry) run(ctx context.Context, from, n int) error {
	for i := from; i < from+n; i++ {
		if err := e.op(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// costFig is what one block measured, per op: times in µs (wall, client CPU, server CPU, in
// scripts), commands and keys left.
type costFig struct {
	wall, client, server, script float64
	cmds, keys                   float64
}

// costStats reads the server's counters: INFO over a connection of its own, its main thread's
// CPU from /proc.
type costStats struct {
	t       *testing.T
	c       *redis.Client
	addr    string
	pid     int
	version string
}

func newCostStats(t *testing.T, srv *redistest.Server) *costStats {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	st := &costStats{t: t, c: c, addr: srv.Addr, pid: srv.PID()}
	info, err := c.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	st.version = infoValue(info, "redis_version")
	if _, err := st.serverCPU(); err != nil {
		t.Fatalf("the server's CPU time: %v", err)
	}
	return st
}

// do sends a command, failing the test on an error.
func (st *costStats) do(ctx context.Context, args ...any) {
	st.t.Helper()
	if err := st.c.Do(ctx, args...).Err(); err != nil {
		st.t.Fatalf("%v: %v", args, err)
	}
}

// serverCPU returns the time on CPU of the server's main thread (its schedstat's first field).
func (st *costStats) serverCPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", st.pid, st.pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("empty schedstat")
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err
}

// clientCPU returns the user+system time of this process (getrusage RUSAGE_SELF).
func clientCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// costSnap is the counters at one moment.
type costSnap struct {
	at             time.Time
	client, server time.Duration
	cmds           map[string]cmdStat // INFO commandstats
	keys           int64              // INFO keyspace, db0
}

type cmdStat struct{ calls, usec int64 }

// snap reads the counters: INFO first and the clocks last at the start of a measurement
// (begin), the reverse at its end, so that neither INFO's work nor the reading's lands inside.
func (st *costStats) snap(ctx context.Context, begin bool) (costSnap, error) {
	var s costSnap
	info := func() error {
		txt, err := st.c.Info(ctx, "commandstats", "keyspace").Result()
		if err != nil {
			return err
		}
		s.cmds, s.keys = parseCommandStats(txt), keyCount(txt)
		return nil
	}
	clocks := func() error {
		var err1, err2 error
		if begin {
			s.server, err1 = st.serverCPU()
			s.client, err2 = clientCPU()
			s.at = time.Now()
		} else {
			s.at = time.Now()
			s.client, err2 = clientCPU()
			s.server, err1 = st.serverCPU()
		}
		return errors.Join(err1, err2)
	}
	if begin {
		return s, errors.Join(info(), clocks())
	}
	err := clocks()
	return s, errors.Join(err, info())
}

// harnessCmds are the commands not counted: the harness's own and the idle connections' PING.
var harnessCmds = map[string]bool{"info": true, "echo": true, "debug": true, "ping": true}

// scriptCmds are the commands that run a script or a function.
var scriptCmds = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// delta returns the commands (harness's aside) and the µs in scripts from a to b.
func delta(a, b costSnap) (cmds, usec int64) {
	for name, s := range b.cmds {
		base := strings.SplitN(name, "|", 2)[0]
		if harnessCmds[base] {
			continue
		}
		cmds += s.calls - a.cmds[name].calls
		if scriptCmds[name] {
			usec += s.usec - a.cmds[name].usec
		}
	}
	return cmds, usec
}

// block runs n ops of e from op from and returns its figures.
func (st *costStats) block(ctx context.Context, e *costEntry, from, n int) (costFig, error) {
	// No runtime.GC before: the collections a block pays for are paced by its own garbage,
	// but for the one that a previous block's may bring forward.
	a, err := st.snap(ctx, true)
	if err != nil {
		return costFig{}, err
	}
	if err := e.run(ctx, from, n); err != nil {
		return costFig{}, err
	}
	b, err := st.snap(ctx, false)
	if err != nil {
		return costFig{}, err
	}
	cmds, usec := delta(a, b)
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	return costFig{
		wall:   per(b.at.Sub(a.at)),
		client: per(b.client - a.client),
		server: per(b.server - a.server),
		script: float64(usec) / float64(n),
		cmds:   float64(cmds) / float64(n),
		keys:   float64(b.keys-a.keys) / float64(n),
	}, nil
}

// idleRate returns the server's CPU per second of wall time (µs/s) while no client sends.
func (st *costStats) idleRate(ctx context.Context, d time.Duration) float64 {
	a, err := st.snap(ctx, true)
	if err != nil {
		st.t.Fatal(err)
	}
	time.Sleep(d)
	b, err := st.snap(ctx, false)
	if err != nil {
		st.t.Fatal(err)
	}
	return float64(b.server-a.server) / float64(time.Microsecond) / b.at.Sub(a.at).Seconds()
}

// monitor runs costKeys ops of e under MONITOR and records, per op, the commands its client
// sent and those its scripts called (MONITOR shows those as sent by "lua").
func (st *costStats) monitor(ctx context.Context, e *costEntry) error {
	conn, err := net.DialTimeout("tcp", st.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, "*1\r\n$7\r\nMONITOR\r\n"); err != nil {
		return err
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		return fmt.Errorf("MONITOR replied %q: %v", line, err)
	}
	if err := e.run(ctx, 0, costKeys); err != nil {
		return err
	}
	end := "cost-monitor-end:" + e.name
	if err := st.c.Echo(ctx, end).Err(); err != nil {
		return err
	}
	e.sent, e.lua = map[string]int{}, map[string]int{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.Contains(line, end) {
			break
		}
		// +1700000000.000000 [0 127.0.0.1:50000] "evalsha" "…" …, or [0 lua] for a script's.
		_, rest, ok := strings.Cut(line, "[")
		if !ok {
			continue
		}
		client, args, _ := strings.Cut(rest, "] ")
		name, _, _ := strings.Cut(strings.TrimPrefix(args, `"`), `"`)
		name = strings.ToLower(name)
		if harnessCmds[name] {
			continue
		}
		if strings.HasSuffix(client, " lua") {
			e.lua[name]++
		} else {
			e.sent[name]++
		}
	}
	for _, n := range e.sent {
		e.top += float64(n)
	}
	e.top /= costKeys
	return nil
}

// watchdogFig is what the watchdog's renewals cost per renewed lease: server CPU, script time,
// client CPU (µs), commands (all, and those the scripts called), and Renew calls per tick.
type watchdogFig struct {
	lib                                string
	server, script, client, cmds, lost float64
	callsPerTick                       float64
}

// watchdog holds -cost.leases leases of lib on one Client with a -cost.lease-ttl TTL and
// measures their renewals over -cost.windows one-second windows; the server's idle rate (µs/s)
// is deducted from its CPU.
func (st *costStats) watchdog(ctx context.Context, lib bench.Lib, idle float64) (watchdogFig, error) {
	be, done, err := lib.Backend()
	if err != nil {
		return watchdogFig{}, err
	}
	defer done()
	cnt := bench.Count(be)
	c := locker.New(cnt.Backend(), locker.WithTTL(*costLeaseTTL))
	defer c.Close()
	leases := make([]*locker.Lease, *costLeases)
	parallel := func(f func(i int) error) error {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for w := range errs {
			wg.Go(func() {
				for i := w; i < len(leases) && errs[w] == nil; i += len(errs) {
					errs[w] = f(i)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	defer parallel(func(i int) error {
		if leases[i] != nil {
			_ = leases[i].Unlock()
		}
		return nil
	})
	if err := parallel(func(i int) (err error) {
		leases[i], err = c.Lock(ctx, "cost:watchdog:"+lib.Name+":"+strconv.Itoa(i))
		return err
	}); err != nil {
		return watchdogFig{}, err
	}
	time.Sleep(*costLeaseTTL) // three ticks: the renewals fall into one batch per tick
	var figs []watchdogFig
	for range *costWindows {
		calls0 := cnt.Calls()
		a, err := st.snap(ctx, true)
		if err != nil {
			return watchdogFig{}, err
		}
		time.Sleep(time.Second)
		b, err := st.snap(ctx, false)
		if err != nil {
			return watchdogFig{}, err
		}
		calls := cnt.Calls().Sub(calls0)
		renewed := float64(calls.RenewEntries)
		if renewed == 0 {
			return watchdogFig{}, errors.New("no lease renewed in a second")
		}
		cmds, usec := delta(a, b)
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / renewed }
		figs = append(figs, watchdogFig{
			lib:          lib.Name,
			server:       (float64(b.server-a.server)/float64(time.Microsecond) - idle*b.at.Sub(a.at).Seconds()) / renewed,
			script:       float64(usec) / renewed,
			client:       us(b.client - a.client),
			cmds:         float64(cmds) / renewed,
			callsPerTick: float64(calls.Renew) / (renewed / float64(len(leases))),
		})
	}
	f := watchdogFig{lib: lib.Name}
	f.server = median(figs, func(w watchdogFig) float64 { return w.server })
	f.script = median(figs, func(w watchdogFig) float64 { return w.script })
	f.client = median(figs, func(w watchdogFig) float64 { return w.client })
	f.cmds = median(figs, func(w watchdogFig) float64 { return w.cmds })
	f.callsPerTick = median(figs, func(w watchdogFig) float64 { return w.callsPerTick })
	for _, l := range leases {
		if context.Cause(l.Context()) == locker.ErrLockLost {
			f.lost++
		}
	}
	return f, nil
}

// expiry turns active expiry back on once every key left has expired, waits until no key
// with a TTL is left, and returns the server's CPU per key expired (µs), the idle rate (µs/s)
// deducted; -1 when no key expired.
func (st *costStats) expiry(ctx context.Context, idle float64) float64 {
	time.Sleep(5500 * time.Millisecond) // the markers' 5s
	stats := func() (time.Duration, int64, int64) {
		txt, err := st.c.Info(ctx, "stats", "keyspace").Result()
		if err != nil {
			st.t.Fatal(err)
		}
		cpu, err := st.serverCPU()
		if err != nil {
			st.t.Fatal(err)
		}
		expired, _ := strconv.ParseInt(infoValue(txt, "expired_keys"), 10, 64)
		return cpu, expired, keyField(txt, "expires")
	}
	cpu0, expired0, _ := stats()
	start := time.Now()
	st.do(ctx, "DEBUG", "SET-ACTIVE-EXPIRE", "1")
	var cpu1 time.Duration
	var expired1 int64
	for deadline := start.Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		var left int64
		if cpu1, expired1, left = stats(); left == 0 {
			break
		}
	}
	n := expired1 - expired0
	if n <= 0 {
		return -1
	}
	busy := float64(cpu1-cpu0)/float64(time.Microsecond) - idle*time.Since(start).Seconds()
	return max(busy, 0) / float64(n)
}

// parseCommandStats reads the cmdstat_NAME:calls=…,usec=… lines of INFO commandstats.
func parseCommandStats(info string) map[string]cmdStat {
	m := make(map[string]cmdStat)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var s cmdStat
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				s.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				s.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		m[name] = s
	}
	return m
}

// infoValue returns the value of key in an INFO reply.
func infoValue(info, key string) string {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// keyCount returns the keys of db0 in an INFO keyspace reply.
func keyCount(info string) int64 { return keyField(info, "keys") }

// keyField returns field (keys, expires) of db0 in an INFO keyspace reply (0 without db0).
func keyField(info, field string) int64 {
	for f := range strings.SplitSeq(infoValue(info, "db0"), ",") {
		if v, ok := strings.CutPrefix(f, field+"="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func median[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// costColumns are the table's per-op figures, in its order.
var costColumns = []struct {
	head string
	f    func(costFig) float64
	prec int
}{
	{"wall µs", func(f costFig) float64 { return f.wall }, 1},
	{"client CPU µs", func(f costFig) float64 { return f.client }, 1},
	{"server CPU µs", func(f costFig) float64 { return f.server }, 1},
	{"in scripts µs", func(f costFig) float64 { return f.script }, 1},
	{"cmds", func(f costFig) float64 { return f.cmds }, 2},
}

// writeCostTable writes the medians per entry as a Markdown table.
func writeCostTable(w io.Writer, entries []*costEntry, perKey float64) {
	fmt.Fprint(w, "| per Lock+Unlock |")
	for _, c := range costColumns {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprintln(w, " script cmds | keys left | expiry µs |")
	fmt.Fprintln(w, "|---|"+strings.Repeat("---:|", len(costColumns)+3))
	for _, e := range entries {
		fmt.Fprintf(w, "| %s |", e.name)
		for _, c := range costColumns {
			fmt.Fprintf(w, " %.*f |", c.prec, median(e.figs, c.f))
		}
		cmds := median(e.figs, func(f costFig) float64 { return f.cmds })
		keys := median(e.figs, func(f costFig) float64 { return f.keys })
		expiry := "?"
		if perKey >= 0 {
			expiry = fmt.Sprintf("%.2f", keys*perKey)
		}
		fmt.Fprintf(w, " %.2f | %.2f | %s |\n", cmds-e.top, keys, expiry)
	}
}

// writeCostSpread writes, per entry and column, the least and greatest value over the rounds.
func writeCostSpread(w io.Writer, entries []*costEntry) {
	for _, e := range entries {
		fmt.Fprintf(w, "  %-16s", e.name)
		for _, c := range costColumns {
			lo, hi := e.figs[0], e.figs[0]
			for _, f := range e.figs {
				if c.f(f) < c.f(lo) {
					lo = f
				}
				if c.f(f) > c.f(hi) {
					hi = f
				}
			}
			fmt.Fprintf(w, "  %s %.*f–%.*f", c.head, c.prec, c.f(lo), c.prec, c.f(hi))
		}
		fmt.Fprintln(w)
	}
}

// writeWatchdogTable writes the watchdog's figures as a Markdown table.
func writeWatchdogTable(w io.Writer, figs []watchdogFig) {
	fmt.Fprintln(w, "| per renewed lease | server CPU µs | in scripts µs | client CPU µs | cmds | Renew calls/tick | lost |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, f := range figs {
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f | %.1f | %.0f |\n", f.lib, f.server, f.script, f.client, f.cmds, f.callsPerTick, f.lost)
	}
}

// perOp formats command counts over n ops as "name ×k" per op, by name.
func perOp(counts map[string]int, n int) string {
	if len(counts) == 0 {
		return "-"
	}
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s ×%s", name, strconv.FormatFloat(float64(counts[name])/float64(n), 'f', -1, 64))
	}
	return strings.Join(parts, ", ")
}

func perKeyString(us float64) string {
	if us < 0 {
		return "? (no key expired)"
	}
	return fmt.Sprintf("%.2f µs", us)
}
