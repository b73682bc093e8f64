// Mutual exclusion across OS processes: the test binary runs itself as workers of different
// drivers, which take turns on one key of one real server and record what they saw; the merged
// history is checked by internal/testkit/history (porcupine, overlaps, fencing tokens).
package backend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/history"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

const (
	// multiProcessOpsEnv overrides the number of Lock/Unlock cycles per worker process.
	multiProcessOpsEnv = "LOCKER_MULTIPROCESS_OPS"
	// defaultMultiProcessOps is the default number of cycles per worker (200 with -short).
	defaultMultiProcessOps = 2000
	// workerEnv carries a worker's workerSpec, as JSON, to the child process.
	workerEnv = "LOCKER_MULTIPROCESS_WORKER"
	// workerTTL is the lease of the workers of TestMultiProcessExclusion and of the writers of
	// TestMultiProcessReadersWriter, renewed: far longer than any critical section, so no lease
	// expires and every overlap is a bug.
	workerTTL = 5 * time.Second
)

// workerRoles are the worker processes, one driver each: go-redis, rueidis, redigo, valkey-go,
// and go-redis again with a pool of one connection (its Lock, Unlock and watchdog renewals
// queue for it).
var workerRoles = append(append([]driver(nil), drivers...), driver{"goredis-pool1", func(t conformance.TB, addr string, opts ...rediscore.Option) locker.Locker {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return goredis.New(rdb, opts...)
}})

// workerSpec is what a worker process is told.
type workerSpec struct {
	Process int           // its number in the history, from 0 (permitMode: its goroutines' are Process*len(permitRoles)+0, +1…)
	Driver  string        // the name of its workerRole
	Addrs   []string      // the server, or the nodes of a quorum (one backend of Driver each)
	Key     string        // the lock's key
	Ops     int           // Lock/Unlock cycles (with a Mode: at most; permitMode: rwMaxOps)
	Out     string        // where to write its history
	Ready   string        // the list it pushes to once connected
	Start   string        // the list it pops the start signal from
	Timeout time.Duration // for the whole run, start signal included

	// rwRole is, for a readers/writer run (rwCycles) of For, what the worker does and its lease;
	// its zero value (Mode "") is for cycles (Lock/Unlock, as fast as it can, with a renewed
	// lease of workerTTL). With Mode permitMode the worker runs permitRoles for For instead, a
	// goroutine each, on one Client with rwRole's lease.
	rwRole
	For time.Duration
}

// Four processes, each with another driver or configuration (workerRoles), lock and unlock one
// key on one server, each recording its calls with the shared monotonic clock and the fencing
// tokens it got. The merged history must be that of one lock: linearizable (porcupine), without
// overlapping holds, with tokens increasing in the order of the holds. On a violation the
// test writes porcupine's HTML view of the history to a temporary directory and prints its path.
//
// Each worker runs 2,000 cycles (about 10s under -race on two cores), 200 with -short;
// LOCKER_MULTIPROCESS_OPS sets another count, for a longer run (10,000: about a minute, of
// which porcupine takes 15s; its time grows about with the square of the history's length):
//
//	LOCKER_MULTIPROCESS_OPS=10000 go test -race -run '^TestMultiProcessExclusion$' -v ./backend/
func TestMultiProcessExclusion(t *testing.T) {
	multiProcess(t, multiProcessOps(t, 1), redistest.StartServer(t).Addr)
}

// The same on a quorum of three servers (backend/quorum): each worker's backend is a quorum of
// three backends of its driver, one per server. A quarter of the cycles by default (500): a
// cycle costs more (three servers to agree, and a retry when no worker got a majority).
func TestMultiProcessExclusionQuorum(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.StartServer(t).Addr)
	}
	multiProcess(t, multiProcessOps(t, 4), addrs...)
}

// multiProcess runs the workers, n cycles each, on the server (one address) or the quorum of
// servers at addrs, and checks the merged history.
func multiProcess(t *testing.T, n int, addrs ...string) {
	timeout := time.Minute + time.Duration(n*len(workerRoles))*5*time.Millisecond
	var specs []workerSpec
	for i, role := range workerRoles {
		specs = append(specs, workerSpec{Process: i, Driver: role.name, Addrs: addrs, Key: "multiprocess", Ops: n, Timeout: timeout})
	}
	ops, wall := runWorkers(t, specs)
	res := history.Check(ops, history.Options{Fenced: true, Timeout: timeout})
	var roles []string
	for i, r := range workerRoles {
		roles = append(roles, fmt.Sprintf("p%d %s", i, r.name))
	}
	t.Logf("%d workers (%s) × %d Lock/Unlock on %d server(s): %v; workers' wall time %v",
		len(workerRoles), strings.Join(roles, ", "), n, len(addrs), res, wall.Round(time.Millisecond))
	failOnViolations(t, res)
	if want := 2 * n * len(workerRoles); res.Ops != want || res.Processes != len(workerRoles) || res.Sections != n*len(workerRoles) {
		t.Fatalf("checked %v, want %d ops of %d processes", res, want, len(workerRoles))
	}
	if res.Handoffs < len(workerRoles)-1 {
		t.Fatalf("%d handoffs between %d processes", res.Handoffs, len(workerRoles))
	}
}

// runWorkers starts a worker process for each of specs (their Out, Ready and Start are set
// here; the first of Addrs of the first carries the signals), waits until all are connected,
// starts them at once, and returns their merged history and the time from the start signal to
// the last exit. A worker that fails fails t; the histories are still returned when every worker
// wrote one (a worker writes its history before it fails), so that the caller's check shows what
// the failure let happen: a hold lost while its lease said it was held, and a writer beside it.
func runWorkers(t *testing.T, specs []workerSpec) ([]history.Op, time.Duration) {
	srv := specs[0].Addrs[0]
	dir := t.TempDir()
	var timeout time.Duration
	for _, s := range specs {
		timeout = max(timeout, s.Timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()

	type exit struct {
		i   int
		err error
	}
	exits := make(chan exit, len(specs))
	outputs := make([]*bytes.Buffer, len(specs))
	var paths []string
	for i := range specs {
		spec := &specs[i]
		spec.Out = filepath.Join(dir, fmt.Sprintf("%d-%s.jsonl", spec.Process, spec.Driver))
		spec.Ready, spec.Start = "multiprocess:ready", "multiprocess:start"
		paths = append(paths, spec.Out)
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessWorker$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
		outputs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outputs[i], outputs[i]
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exits <- exit{i, cmd.Wait()} }()
	}
	failed := func(e exit) {
		t.Errorf("worker %d (%s %s): %v\n%s", specs[e.i].Process, specs[e.i].Driver, specs[e.i].Mode, e.err, outputs[e.i])
	}

	// Every worker has connected and waits for the start signal.
	deadline := time.Now().Add(time.Minute)
	for ready := 0; ready < len(specs); {
		select {
		case e := <-exits:
			failed(e)
			t.FailNow() // the others end with ctx
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers ready after a minute", ready, len(specs))
		}
		if v, err := redistest.Do(srv, 5*time.Second, "BLPOP", "multiprocess:ready", "1"); err != nil {
			t.Fatal(err)
		} else if v != nil {
			ready++
		}
	}
	start := time.Now()
	push := []string{"RPUSH", "multiprocess:start"}
	for range specs {
		push = append(push, "go")
	}
	if _, err := redistest.Do(srv, 5*time.Second, push...); err != nil {
		t.Fatal(err)
	}
	for range specs {
		if e := <-exits; e.err != nil {
			failed(e)
		}
	}
	wall := time.Since(start)
	ops, err := history.ReadFiles(paths...)
	switch {
	case err != nil && t.Failed():
		t.FailNow() // a failed worker wrote none: its error says why
	case err != nil:
		t.Fatal(err)
	}
	return ops, wall
}

// failOnViolations fails t with res's violations, and the path of porcupine's view of the
// history, when it has any. It ends the test when t has failed, with them or before (a worker of
// runWorkers), so that the checks after it see a complete run.
func failOnViolations(t *testing.T, res *history.Result) {
	t.Helper()
	if res.OK() {
		if t.Failed() {
			t.FailNow()
		}
		return
	}
	path, err := res.VisualizeTemp()
	if err != nil {
		t.Errorf("writing the visualization: %v", err)
	}
	t.Fatalf("%d violations:\n%s\nporcupine's view of the history: %s", len(res.Violations), strings.Join(res.Violations, "\n"), path)
}

// multiProcessOps returns the number of cycles per worker: LOCKER_MULTIPROCESS_OPS, or the
// default divided by div.
func multiProcessOps(t *testing.T, div int) int {
	if s := os.Getenv(multiProcessOpsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", multiProcessOpsEnv, s)
		}
		return n
	}
	if testing.Short() {
		return 200 / div
	}
	return defaultMultiProcessOps / div
}

// TestMultiProcessWorker is one worker process of TestMultiProcessExclusion (and
// TestMultiProcessReadersWriter, TestMultiProcessSemaphore): it connects with its driver, waits
// for the start signal, runs its cycles (its readers/writer cycles, or its goroutines' permit
// cycles) and writes its history.
func TestMultiProcessWorker(t *testing.T) {
	raw := os.Getenv(workerEnv)
	if raw == "" {
		t.Skip("run by TestMultiProcessExclusion, TestMultiProcessReadersWriter and TestMultiProcessSemaphore in a child process")
	}
	var spec workerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("%s: %v", workerEnv, err)
	}
	var role *driver
	for i := range workerRoles {
		if workerRoles[i].name == spec.Driver {
			role = &workerRoles[i]
		}
	}
	if role == nil {
		t.Fatalf("no driver %q", spec.Driver)
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Timeout)
	defer cancel()
	backend := role.new(t, spec.Addrs[0])
	if len(spec.Addrs) > 1 {
		var nodes []locker.Locker
		for _, addr := range spec.Addrs {
			nodes = append(nodes, role.new(t, addr))
		}
		backend = quorum.New(nodes...)
	}
	c := locker.New(backend, spec.options()...)
	defer c.Close()
	if _, err := c.Inspect(ctx, spec.Key); err != nil { // connected before the start
		t.Fatal(err)
	}
	if _, err := redistest.Do(spec.Addrs[0], 5*time.Second, "RPUSH", spec.Ready, strconv.Itoa(spec.Process)); err != nil {
		t.Fatal(err)
	}
	if v, err := redistest.Do(spec.Addrs[0], time.Minute+5*time.Second, "BLPOP", spec.Start, "60"); err != nil || v == nil {
		t.Fatalf("no start signal within a minute: %v", err)
	}
	rec := history.NewRecorder(spec.Process)
	var err error
	switch spec.Mode {
	case "":
		err = cycles(ctx, c, spec.Key, spec.Ops, rec)
	case readerMode, writerMode:
		err = rwCycles(ctx, c, spec.Key, spec.rwRole, spec.For, spec.Ops, rec)
	case permitMode:
		// A goroutine per permitRoles, on this process's Client, each a process of the history.
		clients := slices.Repeat([]*locker.Client{c}, len(permitRoles))
		ops, errs := runCycles(ctx, clients, spec.Key, permitRoles, spec.Process*len(permitRoles), spec.For)
		if werr := history.WriteFile(spec.Out, ops); werr != nil {
			t.Fatal(werr)
		}
		if len(errs) > 0 {
			t.Fatal(strings.Join(errs, "\n"))
		}
		return
	default:
		t.Fatalf("no mode %q", spec.Mode)
	}
	if werr := rec.WriteFile(spec.Out); werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// cycles locks and unlocks key n times, recording every operation in rec. The critical section
// is a random 0–50µs of work that yields the processor. Any error ends it: a history holds
// completed operations only.
func cycles(ctx context.Context, c *locker.Client, key string, n int, rec *history.Recorder) error {
	for i := range n {
		call := history.Now()
		l, err := c.Lock(ctx, key)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		rec.Acquired(call, l.Token(), l.Holds())
		for end := history.Now() + rand.Int64N(50_000); history.Now() < end; {
			runtime.Gosched()
		}
		if err := l.Context().Err(); err != nil {
			return fmt.Errorf("cycle %d: the lease ended while held: %w", i, context.Cause(l.Context()))
		}
		call = history.Now()
		if err := l.Unlock(); err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		rec.Released(call)
	}
	return nil
}
