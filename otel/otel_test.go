package lockerotel_test

import (
	"context"
	"errors"
	"net"
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

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
	lockerotel "github.com/hashlock/locker/otel"
)

// The scripted sequence on each backend, in a synctest bubble (exact times): a holder of
// "jobs:1" for 500ms while a second Lock waits for it; a TryLock refused meanwhile; the waiter's
// lease forced away on the backend and found gone by the next renewal; its Unlock; and a quick
// RLock of another key. The instruments must say exactly that.
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
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				spans := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
				obs, err := lockerotel.NewObserver(lockerotel.WithMeterProvider(mp), lockerotel.WithTracerProvider(tp),
					lockerotel.WithKeyLabel(lockerotel.KeyPrefix(":")))
				if err != nil {
					t.Fatal(err)
				}
				b := tc.backend(t)
				c := locker.New(b, locker.WithTTL(3*time.Second), locker.WithObserver(obs))
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

				var rm metricdata.ResourceMetrics
				if err := reader.Collect(ctx, &rm); err != nil {
					t.Fatal(err)
				}
				expectMetrics(t, rm, map[string]string{
					"locker.lock.acquisitions": `
						{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} 2
						{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=not_obtained,locker.try=true} 1
						{locker.kind=shared,locker.outcome=acquired,locker.try=false} 1`,
					"locker.lock.wait": `
						{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=acquired,locker.try=false} count=2 sum=0.5
						{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=not_obtained,locker.try=true} count=1 sum=0
						{locker.kind=shared,locker.outcome=acquired,locker.try=false} count=1 sum=0`,
					"locker.lock.hold": `
						{locker.key.label=jobs,locker.kind=exclusive} count=2 sum=` + ftoa(0.5+heldWaiter.Seconds()) + `
						{locker.kind=shared} count=1 sum=0.25`,
					"locker.leases.held": `
						{locker.key.label=jobs,locker.kind=exclusive} 0
						{locker.kind=shared} 0`,
					"locker.leases.lost": `
						{locker.key.label=jobs,locker.kind=exclusive,locker.lost.cause=gone} 1`,
					"locker.renewals": `
						{locker.renewal.outcome=gone} 1`,
					"locker.renewal.duration": `
						{} count=1 sum=0`,
				})

				ended := spans.Ended()
				if len(ended) != 1 {
					t.Fatalf("%d spans, want 1 (the 500ms wait)", len(ended))
				}
				s := ended[0]
				if s.Name() != "locker.Lock" || s.EndTime().Sub(s.StartTime()) != 500*time.Millisecond {
					t.Errorf("span %s of %v, want locker.Lock of 500ms", s.Name(), s.EndTime().Sub(s.StartTime()))
				}
				if got, want := attrString(attribute.NewSet(s.Attributes()...)), "{locker.key.label=jobs,locker.kind=exclusive,locker.outcome=acquired,locker.try=false}"; got != want {
					t.Errorf("span attributes %s, want %s", got, want)
				}
			})
		})
	}
}

// The key is never an attribute without WithKeyLabel; a span threshold below 0 makes no spans.
func TestNoKeyByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		spans := tracetest.NewSpanRecorder()
		obs, err := lockerotel.NewObserver(lockerotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
			lockerotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))), lockerotel.WithSpanThreshold(-1))
		if err != nil {
			t.Fatal(err)
		}
		c := locker.New(memory.New(), locker.WithObserver(obs))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l, err := c.Lock(ctx, "jobs:1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lock(ctx, "jobs:1"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		_ = l.Unlock()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		expectMetrics(t, rm, map[string]string{
			"locker.lock.acquisitions": `
				{locker.kind=exclusive,locker.outcome=acquired,locker.try=false} 1
				{locker.kind=exclusive,locker.outcome=canceled,locker.try=false} 1`,
		})
		if n := len(spans.Ended()); n != 0 {
			t.Errorf("%d spans, want none", n)
		}
	})
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

func attrString(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// With a threshold of 0 every call gets a span, named after the call, with an error status for
// the outcome "error" only; the span is a child of the span in the call's ctx.
func TestSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		obs, err := lockerotel.NewObserver(lockerotel.WithMeterProvider(sdkmetric.NewMeterProvider()),
			lockerotel.WithTracerProvider(tp), lockerotel.WithSpanThreshold(0))
		if err != nil {
			t.Fatal(err)
		}
		c := locker.New(memory.New(), locker.WithObserver(obs))
		defer c.Close()
		ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
		r, err := c.RLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lock(r.Context(), "k"); !errors.Is(err, locker.ErrUpgrade) {
			t.Fatal(err)
		}
		if _, err := c.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatal(err)
		}
		_ = r.Unlock()
		parent.End()
		var got []string
		for _, s := range spans.Ended() {
			if s.Name() == "request" {
				continue
			}
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("span %s is not a child of the request's span", s.Name())
			}
			outcome := ""
			for _, kv := range s.Attributes() {
				if kv.Key == lockerotel.OutcomeKey {
					outcome = kv.Value.AsString()
				}
			}
			got = append(got, s.Name()+" "+outcome+" "+s.Status().Code.String())
		}
		want := []string{"locker.RLock acquired Unset", "locker.Lock error Error", "locker.TryLock not_obtained Unset"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
