package locker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// recorder is an Observer that writes every event as a line.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines := r.lines
	r.lines = nil
	return lines
}

func (r *recorder) observer() locker.Observer {
	return locker.Observer{
		Lock: func(ctx context.Context, e locker.LockEvent) {
			if (e.Lease != nil) != (e.Err == nil) || ctx == nil {
				r.add("bad lock event %+v", e)
			}
			r.add("lock %s shared=%v try=%v %v wait=%v", e.Key, e.Shared, e.Try, e.Outcome, e.Wait)
		},
		Unlock: func(ctx context.Context, e locker.UnlockEvent) {
			r.add("unlock %s held=%v lost=%v notheld=%v", e.Lease.Key(), e.Held, e.Lost, errors.Is(e.Err, locker.ErrNotHeld))
		},
		Renew: func(ctx context.Context, e locker.RenewEvent) {
			r.add("renew holds=%d renewed=%d gone=%d failed=%d err=%v", e.Holds, e.Renewed, e.Gone, e.Failed, e.Err != nil)
		},
		Lost: func(ctx context.Context, e locker.LostEvent) {
			if e.Lease.Context().Err() != nil { // these tests' leases are renewed: their contexts end after Lost
				r.add("lost after its context ended: %v", context.Cause(ctx))
			}
			r.add("lost %s %v held=%v", e.Lease.Key(), e.Cause, e.Held)
		},
	}
}

func expectLines(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	got := r.take()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// expectLinesInAnyOrder is expectLines for events of calls that run at once.
func expectLinesInAnyOrder(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	got := r.take()
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("events, in any order:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// failing is a backend whose renewals and subscriptions fail while fail is set.
type failing struct {
	locker.Locker
	fail atomic.Bool
}

func (f *failing) Renew(ctx context.Context, batch []locker.Renewal) []error {
	if f.fail.Load() {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = fmt.Errorf("renew: %w", locker.ErrUnavailable)
		}
		return errs
	}
	return f.Locker.Renew(ctx, batch)
}

func (f *failing) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if f.fail.Load() {
		return nil, nil, fmt.Errorf("subscribe: %w", locker.ErrUnavailable)
	}
	return f.Locker.Subscribe(ctx, key)
}

// The Observer sees every outcome of a lock call with its exact wait (synctest time), every
// Unlock with its hold time, every renewal and every lost lease with its cause.
func TestObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		b := memory.New()
		c := locker.New(b, locker.WithTTL(3*time.Second), locker.WithObserver(r.observer()))
		defer c.Close()
		ctx := context.Background()

		a, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		in, err := c.Lock(a.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := in.Unlock(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatal(err)
		}
		if _, err := c.TryRLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatal(err)
		}
		expectLines(t, &r,
			"lock k shared=false try=false acquired wait=0s",
			"lock k shared=false try=false reentered wait=0s",
			"unlock k held=100ms lost=false notheld=false",
			"lock k shared=false try=true not_obtained wait=0s",
			"lock k shared=true try=true not_obtained wait=0s",
		)

		// Contention: a waiter gets the lock when a is unlocked, 500ms later.
		got := make(chan *locker.Lease)
		go func() {
			l, err := c.Lock(ctx, "k")
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		synctest.Wait()
		time.Sleep(500 * time.Millisecond) // a's hold: 600ms; the watchdog renews it at 1s
		if err := a.Unlock(); err != nil {
			t.Fatal(err)
		}
		w := <-got
		// The waiter's Lock returns on the grant's notice, which may come before Unlock reports.
		expectLinesInAnyOrder(t, &r,
			"unlock k held=600ms lost=false notheld=false",
			"lock k shared=false try=false acquired wait=500ms",
		)

		// A Lock whose ctx ends while it waits. w took a grant (a lease of 2s, from its request's
		// send, 500ms before): renewed a third into it, to the TTL, then a third into the TTL.
		short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		if _, err := c.Lock(short, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		expectLines(t, &r,
			"renew holds=1 renewed=1 gone=0 failed=0 err=false",
			"renew holds=1 renewed=1 gone=0 failed=0 err=false",
			"lock k shared=false try=false canceled wait=1.5s",
		)

		// The lock forced away on the backend: the next renewal finds it gone.
		if _, err := b.ForceRelease(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		<-w.Context().Done()
		if err := w.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatal(err)
		}
		expectLines(t, &r,
			"renew holds=1 renewed=0 gone=1 failed=0 err=false",
			"lost k gone held=2.4s", // the renewal after the force finds it gone
			"unlock k held=2.4s lost=true notheld=true",
		)

		// ForceUnlock through the Client.
		f, err := c.RLock(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ForceUnlock(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		_ = f.Unlock()
		expectLines(t, &r,
			"lock f shared=true try=false acquired wait=0s",
			"lost f forced held=0s",
			"unlock f held=0s lost=true notheld=true",
		)

		// A re-entry into the lost hold fails.
		if _, err := c.Lock(w.Context(), "k"); !errors.Is(err, locker.ErrLockLost) {
			t.Fatal(err)
		}
		expectLines(t, &r, "lock k shared=false try=false error wait=0s")
	})
}

// Renewals that fail until the lease may have expired: Renew events with failures, then a lost
// lease (expired); WithLogger writes both, and a failed subscription, without the owner's secret.
func TestObserverExpiredAndLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		}))
		b := &failing{Locker: memory.New()}
		c := locker.New(b, locker.WithTTL(3*time.Second), locker.WithObserver(r.observer()), locker.WithLogger(log),
			locker.WithOwnerLabel("job-7"))
		defer c.Close()
		ctx := context.Background()

		l, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		b.fail.Store(true)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := c.Lock(short, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatal(err)
		}
		<-l.Context().Done()
		expectLines(t, &r,
			"lock k shared=false try=false acquired wait=0s",
			"lock k shared=false try=false canceled wait=100ms",
			"renew holds=1 renewed=0 gone=0 failed=1 err=true", // at 1s, then every 300ms
			"renew holds=1 renewed=0 gone=0 failed=1 err=true",
			"renew holds=1 renewed=0 gone=0 failed=1 err=true",
			"renew holds=1 renewed=0 gone=0 failed=1 err=true",
			"renew holds=1 renewed=0 gone=0 failed=1 err=true",
			"renew holds=1 renewed=0 gone=0 failed=1 err=true",
			"renew holds=1 renewed=0 gone=0 failed=1 err=true",
			"lost k expired held=2.968s",
		)
		logged := buf.String()
		for _, want := range []string{
			`level=WARN msg="locker: release notices unavailable, waiting on timers" key=k error="subscribe: locker: backend unavailable"`,
			`level=WARN msg="locker: renewal failed" holds=1 failed=1 duration=0s error="renew: locker: backend unavailable"`,
			`level=WARN msg="locker: lease lost" key=k owner=job-7#` + l.Owner()[len("job-7#"):][:8] + `… shared=false cause=expired held=2.968s`,
		} {
			if !strings.Contains(logged, want+"\n") {
				t.Errorf("log has no line %q:\n%s", want, logged)
			}
		}
		if strings.Contains(logged, l.Owner()) {
			t.Errorf("log has the owner's token:\n%s", logged)
		}
	})
}

// ctxKey is a context key of the tests below.
type ctxKey string

// seeing is a backend that records the value under ctxKey("span") of the ctx of every Acquire
// and Release, and makes each Release take 50ms.
type seeing struct {
	locker.Locker
	r *recorder
}

func (s *seeing) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	s.r.add("acquire span=%v request=%v", ctx.Value(ctxKey("span")), ctx.Value(ctxKey("request")))
	return s.Locker.Acquire(ctx, req)
}

func (s *seeing) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	s.r.add("release span=%v request=%v", ctx.Value(ctxKey("span")), ctx.Value(ctxKey("request")))
	time.Sleep(50 * time.Millisecond)
	return s.Locker.Release(ctx, req)
}

// Start's ctx is the call's: the backend and Lock get it (two Observers' Starts chain), while
// the Lease's context, Unlock's backend calls, and the Unlock and Lost events keep the caller's
// values only. Unlock reports its own duration; ForceUnlock reports itself.
func TestObserverStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		starts := func(name string) locker.Observer {
			return locker.Observer{
				Start: func(ctx context.Context, e locker.StartEvent) context.Context {
					r.add("start %s %s shared=%v try=%v span=%v", name, e.Key, e.Shared, e.Try, ctx.Value(ctxKey("span")))
					return context.WithValue(ctx, ctxKey("span"), name)
				},
				Lock: func(ctx context.Context, e locker.LockEvent) {
					r.add("lock %s %s %v span=%v", name, e.Key, e.Outcome, ctx.Value(ctxKey("span")))
				},
			}
		}
		c := locker.New(&seeing{Locker: memory.New(), r: &r}, locker.WithObserver(starts("a")), locker.WithObserver(starts("b")),
			locker.WithObserver(locker.Observer{
				Unlock: func(ctx context.Context, e locker.UnlockEvent) {
					r.add("unlock %s duration=%v span=%v request=%v", e.Lease.Key(), e.Duration, ctx.Value(ctxKey("span")), ctx.Value(ctxKey("request")))
				},
				Lost: func(ctx context.Context, e locker.LostEvent) {
					r.add("lost %s span=%v request=%v", e.Lease.Key(), ctx.Value(ctxKey("span")), ctx.Value(ctxKey("request")))
				},
				ForceUnlock: func(ctx context.Context, e locker.ForceUnlockEvent) {
					r.add("force %s removed=%v err=%v request=%v", e.Key, e.Removed, e.Err, ctx.Value(ctxKey("request")))
				},
			}))
		defer c.Close()
		ctx := context.WithValue(context.Background(), ctxKey("request"), "r1")

		l, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if v := l.Context().Value(ctxKey("span")); v != nil {
			t.Errorf("the lease's context has Start's value %v", v)
		}
		if v := l.Context().Value(ctxKey("request")); v != "r1" {
			t.Errorf("the lease's context has the caller's value %v, want r1", v)
		}
		expectLines(t, &r,
			"start a k shared=false try=false span=<nil>",
			"start b k shared=false try=false span=a",
			"acquire span=b request=r1",
			"lock a k acquired span=b",
			"lock b k acquired span=b",
		)
		in, err := c.TryLock(l.Context(), "k") // a re-entry through Start's ctx
		if err != nil || in.Holds() != 2 {
			t.Fatal(in, err)
		}
		if err := in.Unlock(); err != nil {
			t.Fatal(err)
		}
		expectLines(t, &r,
			"start a k shared=false try=true span=<nil>",
			"start b k shared=false try=true span=a",
			"acquire span=b request=r1",
			"lock a k reentered span=b",
			"lock b k reentered span=b",
			"release span=<nil> request=r1",
			"unlock k duration=50ms span=<nil> request=r1",
		)

		if removed, err := c.ForceUnlock(ctx, "k"); !removed || err != nil {
			t.Fatal(removed, err)
		}
		if removed, err := c.ForceUnlock(ctx, "none"); removed || err != nil {
			t.Fatal(removed, err)
		}
		expectLines(t, &r,
			"lost k span=<nil> request=r1",
			"force k removed=true err=<nil> request=r1",
			"force none removed=false err=<nil> request=r1",
		)

		//lint:ignore SA1012 a nil ctx is what this checks
		if _, err := c.Lock(nil, "k"); !errors.Is(err, locker.ErrInvalid) {
			t.Fatal(err)
		}
		expectLines(t, &r,
			"start a k shared=false try=false span=<nil>",
			"start b k shared=false try=false span=a",
			"lock a k error span=b",
			"lock b k error span=b",
		)
	})
}

// An Observer costs the Lock+Unlock path no allocation of its own (events carry no context
// the Lease would have to make); a Start that returns a ctx costs one (the ctx that gives back
// the caller's), one that returns nil none.
func TestObserverAllocations(t *testing.T) {
	count := func(o *locker.Observer) float64 {
		var opts []locker.Option
		if o != nil {
			opts = append(opts, locker.WithObserver(*o))
		}
		c := locker.New(memory.New(), opts...)
		defer c.Close()
		ctx := context.Background()
		return testing.AllocsPerRun(200, func() {
			l, err := c.Lock(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		})
	}
	none := count(nil)
	all := locker.Observer{
		Lock:   func(context.Context, locker.LockEvent) {},
		Unlock: func(context.Context, locker.UnlockEvent) {},
		Lost:   func(context.Context, locker.LostEvent) {},
	}
	if n := count(&all); n != none {
		t.Errorf("%v allocations per Lock+Unlock with an Observer, %v without", n, none)
	}
	all.Start = func(context.Context, locker.StartEvent) context.Context { return nil }
	if n := count(&all); n != none {
		t.Errorf("%v allocations per Lock+Unlock with a Start that keeps ctx, %v without", n, none)
	}
	span := context.WithValue(context.Background(), ctxKey("span"), "s")
	all.Start = func(context.Context, locker.StartEvent) context.Context { return span }
	if n := count(&all); n != none+1 {
		t.Errorf("%v allocations per Lock+Unlock with a Start that gives a ctx, want %v", n, none+1)
	}
}
