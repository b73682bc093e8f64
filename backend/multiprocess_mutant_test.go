package backend_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/testkit/history"
)

// alwaysGrants is a broken lock: every acquire is granted, with a fresh fencing token.
type alwaysGrants struct {
	*memory.Backend
	tokens atomic.Uint64
}

func (b *alwaysGrants) Acquire(context.Context, locker.AcquireRequest) (locker.Acquisition, error) {
	return locker.Acquisition{Holds: 1, Token: b.tokens.Add(1)}, nil
}

func (b *alwaysGrants) Release(context.Context, locker.ReleaseRequest) (int, error) { return 0, nil }

func (b *alwaysGrants) Renew(_ context.Context, batch []locker.Renewal) []error {
	return make([]error, len(batch))
}

// reversedTokens is a lock whose exclusion is sound but whose fencing tokens decrease.
type reversedTokens struct{ *memory.Backend }

func (b reversedTokens) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	a, err := b.Backend.Acquire(ctx, req)
	if a.Token != 0 {
		a.Token = 1<<32 - a.Token
	}
	return a, err
}

// The harness of TestMultiProcessExclusion (the same cycles, recorded and checked the same way,
// in goroutines instead of processes) flags broken locks: one that grants every acquire is not
// linearizable and its holds overlap; one whose tokens decrease fails the token check only. The
// memory backend passes. A flagged history's visualization is written.
func TestMultiProcessHarnessCatchesBrokenLocks(t *testing.T) {
	for _, c := range []harnessCase{
		{"memory", memory.New(), porcupine.Ok, ""},
		{"always-grants", &alwaysGrants{Backend: memory.New()}, porcupine.Illegal, "held the lock from"},
		{"reversed-tokens", reversedTokens{memory.New()}, porcupine.Ok, "does not exceed token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			const workers, n = 4, 100
			ops := cyclesInGoroutines(t, c.backend, workers, n)
			res := history.Check(ops, history.Options{Fenced: true, Timeout: time.Minute})
			t.Logf("%v", res)
			c.check(t, res, res.Violations)
			if res.Ops != 2*workers*n || res.Processes != workers {
				t.Fatalf("checked %v, want %d ops of %d processes", res, 2*workers*n, workers)
			}
			if res.OK() {
				return
			}
			path, err := res.Visualize(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
				t.Fatalf("visualization %s: %v", path, err)
			}
		})
	}
}

// harnessCase is a case of the harnesses of the multi-process tests: a backend, porcupine's
// verdict on its history, and a problem that must be found in it.
type harnessCase struct {
	name    string
	backend locker.Locker
	verdict porcupine.CheckResult
	want    string // in a violation (or another problem the harness finds); "" for none
}

// check fails t unless porcupine's verdict on the case's history, res, is c.verdict and the
// problems found in it (violations and others) include one with c.want, or with c.want "", are
// none.
func (c harnessCase) check(t *testing.T, res *history.Result, problems []string) {
	t.Helper()
	if res.Linearizable != c.verdict || (len(problems) == 0) != (c.want == "") || (c.want != "" && !anyContains(problems, c.want)) {
		t.Fatalf("porcupine: %s, want %s; problems (want one with %q):\n%s", res.Linearizable, c.verdict, c.want, strings.Join(problems, "\n"))
	}
}

// cyclesInGoroutines runs cycles of n Lock/Unlock on one key of backend in each of workers
// goroutines (each with a Client of its own, as the processes of TestMultiProcessExclusion) and
// returns their merged history.
func cyclesInGoroutines(t *testing.T, backend locker.Locker, workers, n int) []history.Op {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg   sync.WaitGroup
		recs []*history.Recorder
	)
	for p := range workers {
		rec := history.NewRecorder(p)
		recs = append(recs, rec)
		c := locker.New(backend, locker.WithTTL(workerTTL), locker.WithFencing())
		defer c.Close()
		wg.Go(func() {
			if err := cycles(ctx, c, "harness", n, rec); err != nil {
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

func anyContains(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
