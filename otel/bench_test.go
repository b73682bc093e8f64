package lockerotel_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	lockerotel "github.com/hashlock/locker/otel"
)

// BenchmarkLockUnlock measures an uncontended Lock+Unlock on the memory backend with the
// adapter's Observer, recording into the SDK (a manual reader that is never collected): the
// adapter's cost is the difference with "none".
func BenchmarkLockUnlock(b *testing.B) {
	sdk := func(extra ...lockerotel.Option) []lockerotel.Option {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		return append([]lockerotel.Option{lockerotel.WithMeterProvider(mp)}, extra...)
	}
	spans := func() lockerotel.Option {
		return lockerotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())))
	}
	for _, bc := range []struct {
		name string
		opts func() []lockerotel.Option
		key  func(i int) string
	}{
		{"none", nil, nil},
		{"metrics", func() []lockerotel.Option { return sdk(lockerotel.WithSpans(false)) }, nil},
		{"metrics+label", func() []lockerotel.Option {
			return sdk(lockerotel.WithSpans(false), lockerotel.WithKeyLabel(lockerotel.KeyPrefix(":")))
		}, nil},
		{"metrics+spans", func() []lockerotel.Option { return sdk(spans()) }, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts []locker.Option
			if bc.opts != nil {
				obs, err := lockerotel.NewObserver(bc.opts()...)
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, locker.WithObserver(obs))
			}
			c := locker.New(memory.New(), opts...)
			defer c.Close()
			ctx := context.Background()
			keys := make([]string, 64)
			for i := range keys {
				keys[i] = "jobs:" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				l, err := c.Lock(ctx, keys[i%len(keys)])
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime returns the CPU time (user and system) of the process so far: on a shared machine, a
// steadier measure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
