// Package lockerotel records OpenTelemetry metrics and spans of a locker.Client: how long callers
// wait for locks and hold them, acquisitions by outcome, held and lost leases, and the watchdog's
// renewals. It is a module of its own (github.com/hashlock/locker/otel), so that a user of the
// locker module who does not import it downloads no OpenTelemetry code.
//
//	obs, err := lockerotel.NewObserver()
//	if err != nil { ... }
//	client := locker.New(backend, locker.WithObserver(obs))
//
// Instruments, units and attributes are listed in docs/observability.md of the locker repository
// and at NewObserver. Attributes stay low-cardinality by default: a lock's key is never one
// unless WithKeyLabel maps keys to labels.
package lockerotel

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/hashlock/locker"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/hashlock/locker/otel"

// DefaultSpanThreshold is the shortest wait of a lock call that gets a span, without
// WithSpanThreshold.
const DefaultSpanThreshold = 100 * time.Millisecond

// Attribute keys.
const (
	// KindKey is "exclusive" (Lock, TryLock) or "shared" (RLock, TryRLock).
	KindKey = attribute.Key("locker.kind")
	// TryKey is true for TryLock and TryRLock (calls that do not wait).
	TryKey = attribute.Key("locker.try")
	// OutcomeKey is a lock call's outcome: locker.Outcome's String ("acquired", "reentered",
	// "not_obtained", "canceled", "error").
	OutcomeKey = attribute.Key("locker.outcome")
	// CauseKey is how a lease was lost: locker.LostCause's String ("expired", "gone", "forced").
	CauseKey = attribute.Key("locker.lost.cause")
	// RenewalKey is a renewed hold's outcome: "renewed", "gone" or "failed".
	RenewalKey = attribute.Key("locker.renewal.outcome")
	// LabelKey is the label WithKeyLabel's function gives a key; absent without it, or when the
	// function returns "".
	LabelKey = attribute.Key("locker.key.label")
)

// An Option configures NewObserver.
type Option func(*config)

type config struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	label     func(key string) string
	threshold time.Duration
}

// WithMeterProvider sets where the metrics go. Default: otel.GetMeterProvider(), the global one
// (which records nothing until the program sets one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets where the spans go. Default: otel.GetTracerProvider(), the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithKeyLabel adds the attribute locker.key.label to every metric and span of a lock, with the
// value label(key) (key as passed to Lock, without the Client's key prefix); "" adds none. The
// function must be fast, safe for concurrent use, and give few distinct values: every label
// makes a time series of every instrument (see KeyPrefix). Default: no key attribute at all; the
// raw key is never one.
func WithKeyLabel(label func(key string) string) Option {
	return func(c *config) { c.label = label }
}

// KeyPrefix returns a label function for WithKeyLabel that keeps the part of a key before the
// first sep ("invoice:42" gives "invoice" with sep ":"), and "" (no label) for a key without
// sep. Use it when the keys' first part names a kind of lock, not an instance.
func KeyPrefix(sep string) func(key string) string {
	return func(key string) string {
		for i := 0; i+len(sep) <= len(key); i++ {
			if key[i:i+len(sep)] == sep {
				return key[:i]
			}
		}
		return ""
	}
}

// WithSpanThreshold makes a span of every lock call that waited d or longer: "locker.Lock",
// "locker.TryLock", "locker.RLock" or "locker.TryRLock", from the call to its return, a child of
// the span in the call's ctx, with the kind, try, outcome and key label attributes and an error
// status for the outcome "error". d < 0: no spans; d == 0: a span for every call. Default
// DefaultSpanThreshold (100ms).
func WithSpanThreshold(d time.Duration) Option {
	return func(c *config) { c.threshold = d }
}

// instruments are the metric instruments of one Observer.
type instruments struct {
	wait, hold, renewTime       metric.Float64Histogram
	acquisitions, lost, renewed metric.Int64Counter
	held                        metric.Int64UpDownCounter
}

// secondsBuckets are the bucket boundaries of the duration histograms, in seconds: 0.5ms to 5
// minutes (OpenTelemetry's default ones are made for milliseconds).
var secondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewObserver returns a locker.Observer, for locker.WithObserver, that records the time of every
// lock call (locker.lock.wait, s) and their count (locker.lock.acquisitions), the time leases are
// held (locker.lock.hold, s), leases held now and lost (locker.leases.held, locker.leases.lost,
// by locker.lost.cause), and the watchdog's renewals (locker.renewal.duration, s;
// locker.renewals by locker.renewal.outcome), with the attributes locker.kind, locker.try,
// locker.outcome (and locker.key.label when asked); and spans of the lock calls that waited
// long (see WithSpanThreshold). The table of instruments: docs/observability.md. It fails only
// when the MeterProvider does.
func NewObserver(opts ...Option) (locker.Observer, error) {
	c := config{threshold: DefaultSpanThreshold}
	for _, opt := range opts {
		opt(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	var ins instruments
	var err error
	hist := func(name, desc string) metric.Float64Histogram {
		h, e := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(secondsBuckets...))
		if err == nil && e != nil {
			err = fmt.Errorf("lockerotel: %s: %w", name, e)
		}
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		x, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err == nil && e != nil {
			err = fmt.Errorf("lockerotel: %s: %w", name, e)
		}
		return x
	}
	ins.wait = hist("locker.lock.wait", "Time of a lock call, from the call to its return.")
	ins.hold = hist("locker.lock.hold", "Time from a lease's grant to its release by Unlock.")
	ins.renewTime = hist("locker.renewal.duration", "Time of a renewal round trip of the watchdog.")
	ins.acquisitions = counter("locker.lock.acquisitions", "{call}", "Lock calls, by outcome.")
	ins.lost = counter("locker.leases.lost", "{lease}", "Leases lost, by cause.")
	ins.renewed = counter("locker.renewals", "{hold}", "Holds renewed by the watchdog, by outcome.")
	held, e := m.Int64UpDownCounter("locker.leases.held", metric.WithUnit("{lease}"), metric.WithDescription("Leases granted and neither unlocked nor lost."))
	if err == nil && e != nil {
		err = fmt.Errorf("lockerotel: locker.leases.held: %w", e)
	}
	ins.held = held
	if err != nil {
		return locker.Observer{}, err
	}
	o := &observer{ins: ins, label: c.label, threshold: c.threshold, tracer: c.tp.Tracer(ScopeName)}
	o.precompute()
	return locker.Observer{Lock: o.lock, Unlock: o.unlock, Renew: o.renew, Lost: o.lostLease}, nil
}

// observer is what NewObserver returns the funcs of.
type observer struct {
	ins       instruments
	label     func(string) string
	threshold time.Duration
	tracer    trace.Tracer

	// Attribute sets without a key label, made once: [shared][try][outcome], [shared],
	// [shared][cause], and the renewal outcomes.
	calls   [2][2][locker.Failed + 1]metric.MeasurementOption
	kinds   [2]metric.MeasurementOption
	causes  [2][locker.LostForced + 1]metric.MeasurementOption
	renewal [3]metric.MeasurementOption
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func kind(shared bool) attribute.KeyValue {
	if shared {
		return KindKey.String("shared")
	}
	return KindKey.String("exclusive")
}

func (o *observer) precompute() {
	for s := range 2 {
		o.kinds[s] = metric.WithAttributeSet(attribute.NewSet(kind(s == 1)))
		for t := range 2 {
			for out := locker.Acquired; out <= locker.Failed; out++ {
				o.calls[s][t][out] = metric.WithAttributeSet(attribute.NewSet(kind(s == 1), TryKey.Bool(t == 1), OutcomeKey.String(out.String())))
			}
		}
		for cause := locker.LostExpired; cause <= locker.LostForced; cause++ {
			o.causes[s][cause] = metric.WithAttributeSet(attribute.NewSet(kind(s == 1), CauseKey.String(cause.String())))
		}
	}
	for i, name := range []string{"renewed", "gone", "failed"} {
		o.renewal[i] = metric.WithAttributeSet(attribute.NewSet(RenewalKey.String(name)))
	}
}

// labelOf returns the key label of key, "" when none.
func (o *observer) labelOf(key string) string {
	if o.label == nil {
		return ""
	}
	return o.label(key)
}

// with returns the attribute option set, with the key label added when there is one.
func with(set metric.MeasurementOption, label string, attrs ...attribute.KeyValue) metric.MeasurementOption {
	if label == "" {
		return set
	}
	return metric.WithAttributes(append(attrs, LabelKey.String(label))...)
}

func (o *observer) lock(ctx context.Context, e locker.LockEvent) {
	label := o.labelOf(e.Key)
	opt := o.calls[b2i(e.Shared)][b2i(e.Try)][e.Outcome]
	if label != "" {
		opt = metric.WithAttributes(kind(e.Shared), TryKey.Bool(e.Try), OutcomeKey.String(e.Outcome.String()), LabelKey.String(label))
	}
	o.ins.wait.Record(ctx, e.Wait.Seconds(), opt)
	o.ins.acquisitions.Add(ctx, 1, opt)
	if e.Lease != nil {
		o.ins.held.Add(ctx, 1, with(o.kinds[b2i(e.Shared)], label, kind(e.Shared)))
	}
	if o.threshold >= 0 && e.Wait >= o.threshold {
		o.span(ctx, e, label)
	}
}

// span records the span of a lock call that waited long, after the fact.
func (o *observer) span(ctx context.Context, e locker.LockEvent, label string) {
	name := "locker.Lock"
	switch {
	case e.Shared && e.Try:
		name = "locker.TryRLock"
	case e.Shared:
		name = "locker.RLock"
	case e.Try:
		name = "locker.TryLock"
	}
	end := time.Now()
	attrs := []attribute.KeyValue{kind(e.Shared), TryKey.Bool(e.Try), OutcomeKey.String(e.Outcome.String())}
	if label != "" {
		attrs = append(attrs, LabelKey.String(label))
	}
	_, span := o.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Wait)), trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindInternal))
	if e.Outcome == locker.Failed {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

func (o *observer) unlock(ctx context.Context, e locker.UnlockEvent) {
	shared := e.Lease.Shared()
	label := o.labelOf(e.Lease.Key())
	opt := with(o.kinds[b2i(shared)], label, kind(shared))
	o.ins.hold.Record(ctx, e.Held.Seconds(), opt)
	if !e.Lost {
		o.ins.held.Add(ctx, -1, opt)
	}
}

func (o *observer) lostLease(ctx context.Context, e locker.LostEvent) {
	shared := e.Lease.Shared()
	label := o.labelOf(e.Lease.Key())
	o.ins.held.Add(ctx, -1, with(o.kinds[b2i(shared)], label, kind(shared)))
	o.ins.lost.Add(ctx, 1, with(o.causes[b2i(shared)][e.Cause], label, kind(shared), CauseKey.String(e.Cause.String())))
}

func (o *observer) renew(ctx context.Context, e locker.RenewEvent) {
	o.ins.renewTime.Record(ctx, e.Duration.Seconds())
	for i, n := range []int{e.Renewed, e.Gone, e.Failed} {
		if n > 0 {
			o.ins.renewed.Add(ctx, int64(n), o.renewal[i])
		}
	}
}
