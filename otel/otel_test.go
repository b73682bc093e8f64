package lockerotel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
	lockerotel "github.com/hashlock/locker/otel"
)

// The scripted sequence on each backend, in a synctest bubble (exact times): a holder of
// "jobs:1" for 500ms while a second Lock waits for it; a TryLock refused meanwhile; the waiter's
// lease forced away on the backend and found gone by the next renewal; its Unlock; a quick
// RLock of another key; a ForceUnlock of a free key. The instruments, their names and units,
// and the scope, must say exactly that.
func TestMetricsAndSpans(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend func(t *testing.T) locker.Locker
	}{
		{"memory", func(*testing.T) locker.Locker { return memory.New() }},
		{"goredis-miniredis", func(t *testing.T) locker.Locker {
			m := redistest.Miniredis(t)
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0", Dialer: func(context.Context, string, string) (net.Conn, error) { return m.Dial() }})
			t.Cleanup(func() { rdb.Close() })
			return goredis.New(rdb, rediscore.WithNoticeLinger(0)) // no connection outlives the bubble
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := newObs(t, lockerotel.WithKeyLabel(lockerotel.KeyPrefix(":")))
				b := tc.backend(t)
				c := locker.New(b, locker.WithTTL(3*time.Second), locker.WithObserver(o.obs))
				defer c.Close()
				ctx := context.Background()

				holder, err := c.Lock(ctx, "jobs:1")
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan *locker.Lease)
				go func() {
					l, err := c.Lock(ctx, "jobs:1")
					if err != nil {
						t.Error(err)
					}
					got <- l
				}()
				synctest.Wait()
				if _, err := c.TryLock(ctx, "jobs:1"); !errors.Is(err, locker.ErrNotObtained) {
					t.Fatal(err)
				}
				time.Sleep(500 * time.Millisecond)
				if err := holder.Unlock(); err != nil {
					t.Fatal(err)
				}
				waiter := <-got // the unlock granted it the key
				granted := time.Now()
				if _, err := b.ForceRelease(ctx, "jobs:1"); err != nil {
					t.Fatal(err)
				}
				// The watchdog renews the waiter's hold a third into the grant's lease (2s),
				// which counts from the send of the waiter's latest request (when exactly depends
				// on the backend's retries), and finds it gone.
				<-waiter.Context().Done()
				heldWaiter := time.Since(granted)
				time.Sleep(time.Second) // its hold is recorded at the loss, not at this Unlock
				if err := waiter.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
					t.Fatal(err)
				}
				r, err := c.RLock(ctx, "other") // no label: no ":"
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(250 * time.Millisecond)
				if err := r.Unlock(); err != nil {
					t.Fatal(err)
				}
				if removed, err := c.ForceUnlock(ctx, "jobs:2"); removed || err != nil {
					t.Fatal(removed, err)
				}

				rm := o.collect(t)
				if sm := rm.ScopeMetrics; len(sm) != 1 || sm[0].Scope.Name != lockerotel.ScopeName || sm[0].Scope.Version != buildVersion(t) {
					t.Errorf("scopes %+v, want one: %s %s", sm, lockerotel.ScopeName, buildVersion(t))
				}
				var names []string
				for _, m := range rm.ScopeMetrics[0].Metrics {
					names = append(names, m.Name+" "+m.Unit)
				}
				sort.Strings(names)
				if got, want := strings.Join(names, ", "), "locker.force_unlock.duration s, locker.lease.active {lease}, "+
					"locker.lease.lost {lease}, locker.lock.hold.duration s, locker.lock.pending {call}, locker.lock.wait.duration s, "+
					"locker.renewal.duration s, locker.renewal.holds {hold}, locker.unlock.duration s"; got != want {
					t.Errorf("instruments:\n%s\nwant:\n%s", got, want)
				}
				expectMetrics(t, rm, map[string]string{
					"locker.lock.wait.duration": `
						{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=2 sum=0.5
						{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=not_obtained,locker.try=true} count=1 sum=0
						{locker.kind=shared,locker.outcome=acquired,locker.try=false} count=1 sum=0`,
					"locker.lock.pending": `
						{locker.key.label=jobs,locker.kind=exclusive,locker.try=false} 0
						{locker.key.label=jobs,locker.kind=exclusive,locker.try=true} 0
						{locker.kind=shared,locker.try=false} 0`,
					"locker.lock.hold.duration": `
						{locker.key.label=jobs,locker.kind=exclusive} count=1 sum=0.5
						{error.type=lock_lost,locker.key.label=jobs,locker.kind=exclusive} count=1 sum=` + ftoa(heldWaiter.Seconds()) + `
						{locker.kind=shared} count=1 sum=0.25`,
					"locker.unlock.duration": `
						{locker.key.label=jobs,locker.kind=exclusive} count=1 sum=0
						{error.type=not_held,locker.key.label=jobs,locker.kind=exclusive} count=1 sum=0
						{locker.kind=shared} count=1 sum=0`,
					"locker.lease.active": `
						{locker.key.label=jobs,locker.kind=exclusive} 0
						{locker.kind=shared} 0`,
					"locker.lease.lost": `
						{locker.key.label=jobs,locker.kind=exclusive,locker.lost.cause=gone} 1`,
					"locker.renewal.holds": `
						{locker.renewal.outcome=gone} 1`,
					"locker.renewal.duration": `
						{} count=1 sum=0`,
					"locker.force_unlock.duration": `
						{locker.force_unlock.removed=false,locker.key.label=jobs} count=1 sum=0`,
				})

				var spans []string
				for _, s := range o.spans.Ended() {
					spans = append(spans, s.Name()+" "+s.EndTime().Sub(s.StartTime()).String()+" "+attrString(attribute.NewSet(s.Attributes()...)))
					if s.InstrumentationScope().Version != buildVersion(t) {
						t.Errorf("span scope %+v", s.InstrumentationScope())
					}
				}
				expectLines(t, "spans", spans, `
					locker.Lock 0s {locker.key.label=jobs,locker.kind=exclusive,locker.outcome=acquired,locker.try=false}
					locker.TryLock 0s {locker.key.label=jobs,locker.kind=exclusive,locker.outcome=not_obtained,locker.try=true}
					locker.Lock 500ms {locker.key.label=jobs,locker.kind=exclusive,locker.outcome=acquired,locker.try=false}
					locker.RLock 0s {locker.kind=shared,locker.outcome=acquired,locker.try=false}`)
			})
		})
	}
}

// buildVersion is the version of the otel module that the test binary's build records: the
// scope's.
func buildVersion(t *testing.T) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != lockerotel.ScopeName || bi.Main.Version == "" {
		t.Fatalf("no version of %s in the build: %+v", lockerotel.ScopeName, bi)
	}
	return bi.Main.Version
}

// obs is an Observer recording into an in-memory reader and span recorder.
type obs struct {
	obs    locker.Observer
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newObs(t *testing.T, opts ...lockerotel.Option) *obs {
	t.Helper()
	o := &obs{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	var err error
	o.obs, err = lockerotel.NewObserver(append([]lockerotel.Option{
		lockerotel.WithMeterProvider(o.mp),
		lockerotel.WithTracerProvider(o.tp),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *obs) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// The key is never an attribute without WithKeyLabel, nor in a span's status; WithSpans(false)
// makes no spans.
func TestNoKeyByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, spans := range []bool{true, false} {
			o := newObs(t, lockerotel.WithSpans(spans))
			c := locker.New(memory.New(), locker.WithObserver(o.obs))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			l, err := c.Lock(ctx, "jobs:1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Lock(ctx, "jobs:1"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			_ = l.Unlock()
			cancel()
			c.Close()
			expectMetrics(t, o.collect(t), map[string]string{
				"locker.lock.wait.duration": `
					{locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=1 sum=0
					{error.type=timeout,locker.kind=exclusive,locker.outcome=canceled,locker.try=false} count=1 sum=1`,
			})
			var got []string
			for _, s := range o.spans.Ended() {
				got = append(got, s.Name()+" "+s.Status().Code.String()+" "+s.Status().Description)
				for _, kv := range s.Attributes() {
					if strings.Contains(kv.Value.String(), "jobs") {
						t.Errorf("span %s has the key: %v", s.Name(), kv)
					}
				}
			}
			want := ""
			if spans {
				want = "locker.Lock Unset \nlocker.Lock Error timeout"
			}
			expectLines(t, "spans", got, want)
		}
	})
}

// refusing is a backend whose Acquire fails with err while err is set.
type refusing struct {
	*memory.Backend
	err error
}

func (r *refusing) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if r.err != nil {
		return locker.Acquisition{}, r.err
	}
	return r.Backend.Acquire(ctx, req)
}

// error.type tells the failures apart, on the wait histogram and on the spans, which end with an
// error status from the call's start (fast errors too); a TryLock's refusal is no error. The
// status names the key only with key labels.
func TestErrorType(t *testing.T) {
	for _, labels := range []bool{false, true} {
		t.Run(fmt.Sprint("labels=", labels), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []lockerotel.Option
				if labels {
					opts = append(opts, lockerotel.WithKeyLabel(func(string) string { return "" }))
				}
				o := newObs(t, opts...)
				b := &refusing{Backend: memory.New()}
				c := locker.New(b, locker.WithObserver(o.obs))
				defer c.Close()
				ctx := context.Background()
				expect := func(err, want error) {
					t.Helper()
					if !errors.Is(err, want) {
						t.Fatalf("%v, want %v", err, want)
					}
				}
				_, err := c.Lock(ctx, "")
				expect(err, locker.ErrInvalid)
				r, err := c.RLock(ctx, "k")
				expect(err, nil)
				_, err = c.Lock(r.Context(), "k")
				expect(err, locker.ErrUpgrade)
				_, err = c.TryLock(ctx, "k")
				expect(err, locker.ErrNotObtained)
				_, err = c.Lock(ctx, "k", locker.WithRetry(locker.LimitRetry(locker.LinearBackoff(time.Second), 1)))
				expect(err, locker.ErrNotObtained)
				if _, err := c.ForceUnlock(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				_, err = c.RLock(r.Context(), "k")
				expect(err, locker.ErrLockLost)
				b.err = fmt.Errorf("dial: %w", locker.ErrUnavailable)
				_, err = c.TryLock(ctx, "k")
				expect(err, locker.ErrUnavailable)
				b.err = errors.New("boom")
				_, err = c.TryLock(ctx, "k")
				if err == nil {
					t.Fatal("no error")
				}
				c.Close()
				_, err = c.TryLock(ctx, "k")
				expect(err, locker.ErrClosed)

				expectMetrics(t, o.collect(t), map[string]string{
					"locker.lock.wait.duration": `
						{error.type=invalid,locker.kind=exclusive,locker.outcome=error,locker.try=false} count=1 sum=0
						{locker.kind=shared,locker.outcome=acquired,locker.try=false} count=1 sum=0
						{error.type=upgrade,locker.kind=exclusive,locker.outcome=error,locker.try=false} count=1 sum=0
						{locker.kind=exclusive,locker.outcome=not_obtained,locker.try=true} count=1 sum=0
						{error.type=not_obtained,locker.kind=exclusive,locker.outcome=not_obtained,locker.try=false} count=1 sum=1
						{error.type=lock_lost,locker.kind=shared,locker.outcome=error,locker.try=false} count=1 sum=0
						{error.type=unavailable,locker.kind=exclusive,locker.outcome=error,locker.try=true} count=1 sum=0
						{error.type=_OTHER,locker.kind=exclusive,locker.outcome=error,locker.try=true} count=1 sum=0
						{error.type=closed,locker.kind=exclusive,locker.outcome=canceled,locker.try=true} count=1 sum=0`,
					"locker.force_unlock.duration": `
						{locker.force_unlock.removed=true} count=1 sum=0`,
					"locker.lease.lost": `
						{locker.kind=shared,locker.lost.cause=forced} 1`,
				})
				var got []string
				for _, s := range o.spans.Ended() {
					errType := ""
					for _, kv := range s.Attributes() {
						if kv.Key == lockerotel.ErrorTypeKey {
							errType = kv.Value.AsString()
						}
					}
					got = append(got, s.Name()+" "+errType+" "+s.Status().Code.String()+" "+s.Status().Description)
				}
				want := `
					locker.Lock invalid Error invalid
					locker.RLock  Unset 
					locker.Lock upgrade Error upgrade
					locker.TryLock  Unset 
					locker.Lock not_obtained Error not_obtained
					locker.RLock lock_lost Error lock_lost
					locker.TryLock unavailable Error unavailable
					locker.TryLock _OTHER Error _OTHER
					locker.TryLock closed Error closed`
				if labels { // the messages
					want = `
						locker.Lock invalid Error locker: lock "": invalid argument: empty key
						locker.RLock  Unset 
						locker.Lock upgrade Error locker: lock "k": memory: acquire: cannot upgrade a shared hold to an exclusive one
						locker.TryLock  Unset 
						locker.Lock not_obtained Error locker: lock "k" not obtained: held by another owner for 29s more
						locker.RLock lock_lost Error locker: lock "k": context canceled: lock lost
						locker.TryLock unavailable Error locker: lock "k": dial: locker: backend unavailable
						locker.TryLock _OTHER Error locker: lock "k": boom
						locker.TryLock closed Error locker: lock "k": client closed`
				}
				expectLines(t, "spans", got, want)
			})
		})
	}
}

// tracing is a backend that makes a span of each Acquire and Release from the ctx it is given,
// as an instrumented driver (redisotel) does.
type tracing struct {
	locker.Locker
	tracer trace.Tracer
}

func (b *tracing) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	_, span := b.tracer.Start(ctx, "backend.Acquire")
	defer span.End()
	return b.Locker.Acquire(ctx, req)
}

func (b *tracing) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	_, span := b.tracer.Start(ctx, "backend.Release")
	defer span.End()
	return b.Locker.Release(ctx, req)
}

// A lock call's span starts with the call, a child of the span in its ctx, and parents the
// backend's spans; the lease's context, and Unlock's backend calls, carry the caller's span, not
// the ended lock span; a lost lease adds an event to the caller's span.
func TestSpansParentTheBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObs(t, lockerotel.WithAttributes(attribute.String("locker.client", "billing")))
		c := locker.New(&tracing{Locker: memory.New(), tracer: o.tp.Tracer("backend")}, locker.WithObserver(o.obs))
		defer c.Close()
		ctx, request := o.tp.Tracer("test").Start(context.Background(), "request")
		l, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		_, work := o.tp.Tracer("test").Start(l.Context(), "work")
		time.Sleep(time.Second)
		work.End()
		if _, err := c.ForceUnlock(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock()
		request.End()

		names := map[trace.SpanID]string{}
		for _, s := range o.spans.Ended() {
			names[s.SpanContext().SpanID()] = s.Name()
		}
		var got []string
		for _, s := range o.spans.Ended() {
			line := s.Name() + " < " + names[s.Parent().SpanID()]
			for _, e := range s.Events() {
				line += " event " + e.Name + " " + attrString(attribute.NewSet(e.Attributes...))
			}
			if s.Name() == "locker.Lock" {
				line += " " + attrString(attribute.NewSet(s.Attributes()...))
			}
			got = append(got, line)
		}
		expectLines(t, "spans", got, `
			backend.Acquire < locker.Lock
			locker.Lock < request {locker.client=billing,locker.kind=exclusive,locker.outcome=acquired,locker.try=false}
			work < request
			backend.Release < request
			request <  event locker.lease.lost {locker.client=billing,locker.kind=exclusive,locker.lost.cause=forced}`)
	})
}

// A Lock that waits shows in locker.lock.pending while it waits; WithAttributes tells Clients
// apart on every instrument.
func TestPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		o := newObs(t, lockerotel.WithSpans(false))
		one, err := lockerotel.NewObserver(lockerotel.WithMeterProvider(o.mp),
			lockerotel.WithAttributes(attribute.String("locker.client", "one")))
		if err != nil {
			t.Fatal(err)
		}
		c1 := locker.New(b, locker.WithObserver(one))
		defer c1.Close()
		c2 := locker.New(b, locker.WithObserver(o.obs))
		defer c2.Close()
		ctx := context.Background()
		l, err := c1.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			l, err := c2.Lock(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			_ = l.Unlock()
		}()
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		expectMetrics(t, o.collect(t), map[string]string{
			"locker.lock.pending": `
				{locker.client=one,locker.kind=exclusive,locker.try=false} 0
				{locker.kind=exclusive,locker.try=false} 1`,
			"locker.lease.active": `
				{locker.client=one,locker.kind=exclusive} 1`,
		})
		_ = l.Unlock()
		<-done
		expectMetrics(t, o.collect(t), map[string]string{
			"locker.lock.pending": `
				{locker.client=one,locker.kind=exclusive,locker.try=false} 0
				{locker.kind=exclusive,locker.try=false} 0`,
			"locker.lease.active": `
				{locker.client=one,locker.kind=exclusive} 0
				{locker.kind=exclusive} 0`,
			"locker.lock.hold.duration": `
				{locker.client=one,locker.kind=exclusive} count=1 sum=180
				{locker.kind=exclusive} count=1 sum=0`,
		})
	})
}

// A lease lost and never unlocked is counted out, its hold recorded to the loss.
func TestLostNeverUnlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObs(t, lockerotel.WithSpans(false))
		c := locker.New(memory.New(), locker.WithObserver(o.obs))
		defer c.Close()
		ctx := context.Background()
		start := time.Now()
		l, err := c.Lock(ctx, "k", locker.WithTTL(time.Second), locker.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		<-l.Context().Done() // its deadline, a margin before the TTL: the Client loses it then
		lost := time.Since(start)
		time.Sleep(time.Second)
		expectMetrics(t, o.collect(t), map[string]string{
			"locker.lease.active": `
				{locker.kind=exclusive} 0`,
			"locker.lease.lost": `
				{locker.kind=exclusive,locker.lost.cause=expired} 1`,
			"locker.lock.hold.duration": `
				{error.type=lock_lost,locker.kind=exclusive} count=1 sum=` + ftoa(lost.Seconds()),
		})
	})
}

// Labels past the limit, and those OnlyLabels does not allow, are recorded as OtherLabel.
func TestLabelsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []lockerotel.Option
		want string
	}{
		{"limit", []lockerotel.Option{lockerotel.WithKeyLabel(lockerotel.KeyPrefix(":")), lockerotel.WithKeyLabelLimit(2)}, `
			{locker.key.label=_other,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=3 sum=0
			{locker.key.label=user-1,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=2 sum=0
			{locker.key.label=user-2,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=1 sum=0
			{locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=1 sum=0`},
		{"only", []lockerotel.Option{lockerotel.WithKeyLabel(lockerotel.OnlyLabels(lockerotel.KeyPrefix(":"), "user-3"))}, `
			{locker.key.label=_other,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=4 sum=0
			{locker.key.label=user-3,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=2 sum=0
			{locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=1 sum=0`},
		{"zero", []lockerotel.Option{lockerotel.WithKeyLabel(lockerotel.KeyPrefix(":")), lockerotel.WithKeyLabelLimit(0)}, `
			{locker.key.label=_other,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=6 sum=0
			{locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=1 sum=0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := newObs(t, append(tc.opts, lockerotel.WithSpans(false))...)
				c := locker.New(memory.New(), locker.WithObserver(o.obs))
				defer c.Close()
				for _, key := range []string{"user-1:profile", "user-2:profile", "user-3:profile", "user-1:cart", "user-4:profile", "user-3:cart", "nolabel"} {
					l, err := c.Lock(context.Background(), key)
					if err != nil {
						t.Fatal(err)
					}
					_ = l.Unlock()
				}
				expectMetrics(t, o.collect(t), map[string]string{"locker.lock.wait.duration": tc.want})
			})
		})
	}
}

func TestKeyPrefix(t *testing.T) {
	f := lockerotel.KeyPrefix("::")
	for key, want := range map[string]string{"a::b::c": "a", "::b": "", "abc": "", "a:b": "", "": ""} {
		if got := f(key); got != want {
			t.Errorf("KeyPrefix(%q)(%q) = %q, want %q", "::", key, got, want)
		}
	}
}

// expectMetrics compares the named metrics of rm, as lines "{attributes} value" (sums) or
// "{attributes} count=N sum=S" (histograms), sorted, with want.
func expectMetrics(t *testing.T, rm metricdata.ResourceMetrics, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockerotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			var lines []string
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, attrString(p.Attributes)+" "+itoa(p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, attrString(p.Attributes)+" count="+itoa(int64(p.Count))+" sum="+ftoa(p.Sum))
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
			sort.Strings(lines)
			got[m.Name] = strings.Join(lines, "\n")
		}
	}
	for name, w := range want {
		var lines []string
		for line := range strings.SplitSeq(strings.TrimSpace(w), "\n") {
			lines = append(lines, strings.TrimSpace(line))
		}
		sort.Strings(lines)
		if got[name] != strings.Join(lines, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got[name], strings.Join(lines, "\n"))
		}
	}
}

// expectLines compares got, in order, with the lines of want (each trimmed of the indentation).
func expectLines(t *testing.T, what string, got []string, want string) {
	t.Helper()
	var lines []string
	for line := range strings.SplitSeq(strings.TrimSpace(want), "\n") {
		if line = strings.TrimLeft(line, "\t"); line != "" {
			lines = append(lines, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(lines, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(lines, "\n"))
	}
}

func attrString(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}
