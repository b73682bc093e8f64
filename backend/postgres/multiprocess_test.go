package postgres_test

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/history"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// workerEnv carries a worker's spec, as JSON, to the child process.
const workerEnv = "LOCKER_POSTGRES_WORKER"

// workerSpec is what a worker process is told.
type workerSpec struct {
	Process int
	URL     string // the server, with the worker's pool size
	Schema  string
	Key     string
	Ops     int
	Out     string // where it writes its history
}

// loaders are the goroutines of the parent that lock and unlock keys of their own meanwhile.
const loaders = 8

// startSignal is the advisory lock the parent holds until every worker is connected: each takes
// it shared (and lets go at once) to start.
const startSignal = 3030

// Four processes, with pools of 1, 2, 4 and 10 connections, lock and unlock one key of one
// server, with fencing, while the parent loads the database with Lock/Unlock cycles on 8 other
// keys; the merged history must be that of one lock: linearizable (porcupine), no overlapping
// holds, tokens increasing in the order of the holds. 250 cycles per worker (100 with -short):
// about 30s under -race on two loaded cores.
func TestMultiProcessExclusion(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := srv.Schema(t)
	pool := srv.Pool(t)
	b := migratedOn(t, pool, schema)
	ctx := context.Background()
	ops := 250
	if testing.Short() {
		ops = 100
	}
	signal, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer signal.Release()
	if _, err := signal.Exec(ctx, "select pg_advisory_lock($1)", startSignal); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	exits := make(chan error, 4)
	outputs := make([]*bytes.Buffer, 4)
	for i, conns := range []int{1, 2, 4, 10} {
		spec := workerSpec{Process: i, URL: fmt.Sprintf("%s&pool_max_conns=%d", srv.URL(), conns), Schema: schema, Key: "multiprocess", Ops: ops,
			Out: filepath.Join(dir, fmt.Sprintf("%d.jsonl", i))}
		paths = append(paths, spec.Out)
		raw, _ := json.Marshal(spec)
		cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcessWorker$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
		outputs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outputs[i], outputs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exits <- cmd.Wait() }()
	}
	// Every worker waits on the signal: 4 sessions wait for the lock.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var waiting int
		if err := pool.QueryRow(ctx, "select count(*) from pg_locks where locktype = 'advisory' and classid = 0 and objid = $1 and objsubid = 1 and not granted", startSignal).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 workers ready after a minute", waiting)
		}
	}
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	c := locker.New(b, locker.WithTTL(5*time.Second))
	defer c.Close()
	for i := range loaders {
		wg.Go(func() {
			for load.Err() == nil {
				if l, err := c.Lock(load, fmt.Sprintf("load:%d", i)); err == nil {
					l.Unlock()
				}
			}
		})
	}
	if _, err := signal.Exec(ctx, "select pg_advisory_unlock($1)", startSignal); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 4 {
		if err := <-exits; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	wall := time.Since(start)
	stopLoad()
	wg.Wait()
	if t.Failed() {
		for i, o := range outputs {
			t.Logf("worker %d:\n%s", i, o)
		}
		t.FailNow()
	}
	hist, err := history.ReadFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	res := history.Check(hist, history.Options{Fenced: true, Timeout: time.Minute})
	t.Logf("4 workers × %d Lock/Unlock, %d loaders: %v; workers' wall time %v", ops, loaders, res, wall.Round(time.Millisecond))
	if !res.OK() {
		path, _ := res.VisualizeTemp()
		t.Fatalf("%d violations:\n%s\nporcupine's view: %s", len(res.Violations), strings.Join(res.Violations, "\n"), path)
	}
	if res.Ops != 2*4*ops || res.Processes != 4 || res.Handoffs < 3 {
		t.Fatalf("checked %v, want %d ops of 4 processes", res, 2*4*ops)
	}
}

// TestMultiProcessWorker is one worker process of TestMultiProcessExclusion.
func TestMultiProcessWorker(t *testing.T) {
	raw := os.Getenv(workerEnv)
	if raw == "" {
		t.Skip("run by TestMultiProcessExclusion in a child process")
	}
	var spec workerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, spec.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b := postgres.New(pool, postgres.WithTable(spec.Schema, "locker"))
	defer b.Close()
	c := locker.New(b, locker.WithTTL(5*time.Second), locker.WithFencing())
	defer c.Close()
	if _, err := c.Inspect(ctx, spec.Key); err != nil { // connected before the start
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "select pg_advisory_lock_shared($1), pg_advisory_unlock_shared($1)", startSignal); err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(spec.Process)
	for i := range spec.Ops {
		call := history.Now()
		l, err := c.Lock(ctx, spec.Key)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		rec.Acquired(call, l.Token(), l.Holds())
		for end := history.Now() + rand.Int64N(50_000); history.Now() < end; {
			runtime.Gosched()
		}
		if err := l.Context().Err(); err != nil {
			t.Fatalf("cycle %d: the lease ended while held: %v", i, context.Cause(l.Context()))
		}
		call = history.Now()
		if err := l.Unlock(); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		rec.Released(call)
	}
	if err := rec.WriteFile(spec.Out); err != nil {
		t.Fatal(err)
	}
}
