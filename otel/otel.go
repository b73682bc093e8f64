// Package lockerotel records OpenTelemetry metrics and spans of a locker.Client: how long callers
// wait for locks and hold them, how many wait now, leases active and lost, unlocks, force unlocks
// and the watchdog's renewals, with error.type on failures; and a span of every lock call. It is a
// module of its own (github.com/hashlock/locker/otel), so that a user of the locker module who
// does not import it downloads no OpenTelemetry code.
//
//	obs, err := lockerotel.NewObserver()
//	if err != nil { ... }
//	client := locker.New(backend, locker.WithObserver(obs))
//
// Instruments, units and attributes are listed in docs/observability.md of the locker repository
// and at NewObserver. Attributes stay bounded by default: a lock's key is never one, and the
// labels WithKeyLabel makes of keys are capped (WithKeyLabelLimit).
package lockerotel

import (
	"fmt"
	"runtime/debug"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/hashlock/locker"
)

// ScopeName is the instrumentation scope of the meter and the tracer. The scope's version is
// this module's, as the program's build records it.
const ScopeName = "github.com/hashlock/locker/otel"

// DefaultKeyLabelLimit is the number of distinct key labels an Observer records, without
// WithKeyLabelLimit.
const DefaultKeyLabelLimit = 100

// An Option configures NewObserver.
type Option func(*config)

type config struct {
	mp     metric.MeterProvider
	tp     trace.TracerProvider
	label  func(key string) string
	limit  int
	noSpan bool
	attrs  []attribute.KeyValue
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

// WithKeyLabel adds the attribute locker.key.label, with the value label(key) (key as passed to
// Lock, without the Client's key prefix; "" adds none), to every metric of a lock and to spans,
// and lets span statuses carry error messages (which name the key). Every label makes a time
// series of every instrument: the function must give few values (a kind of lock, not an
// instance: see KeyPrefix, OnlyLabels), be fast and safe for concurrent use. Past
// WithKeyLabelLimit distinct labels, new ones count as OtherLabel. Default: no key attribute.
func WithKeyLabel(label func(key string) string) Option {
	return func(c *config) { c.label = label }
}

// WithKeyLabelLimit sets how many distinct key labels the Observer records: the first n it sees;
// later ones are recorded as OtherLabel, so that a label function that gives a value per user
// or per order cannot make unbounded time series. n <= 0: no label but OtherLabel. Default
// DefaultKeyLabelLimit (100).
func WithKeyLabelLimit(n int) Option {
	return func(c *config) { c.limit = max(n, 0) }
}

// WithAttributes adds attrs to every metric and span of the Observer: constant attributes that
// tell two Clients (or services) apart, e.g. attribute.String("locker.client", "billing").
// Keep them constant and few. Default: none.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// WithSpans sets whether the Observer makes a span of every lock call, and an event on the
// caller's span at a lost lease (see NewObserver). A sampled span costs about twice what the
// metrics do (docs/observability.md). Default true.
func WithSpans(on bool) Option {
	return func(c *config) { c.noSpan = !on }
}

// NewObserver returns a locker.Observer, for locker.WithObserver, that records (docs/observability.md
// has the table): locker.lock.wait.duration (s; lock calls by locker.outcome and error.type),
// locker.lock.pending (calls under way), locker.lock.hold.duration (s; to Unlock, or to the
// loss), locker.lease.active, locker.lease.lost (by locker.lost.cause), locker.unlock.duration,
// locker.force_unlock.duration, locker.renewal.duration (s) and locker.renewal.holds (by
// locker.renewal.outcome); and a span per lock call, from its start (the backend's spans are its
// children), with an event on the caller's span when a lease is lost. Use its funcs together, as
// returned. It fails only when the MeterProvider does.
func NewObserver(opts ...Option) (locker.Observer, error) {
	c := config{limit: DefaultKeyLabelLimit}
	for _, opt := range opts {
		opt(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	version := moduleVersion()
	ins, err := newInstruments(c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version)))
	if err != nil {
		return locker.Observer{}, err
	}
	o := &observer{ins: ins, attrs: attrs{label: c.label, limit: c.limit, fixed: c.attrs, sets: map[attrKey]*attrSet{}, labels: map[string]struct{}{}}}
	if !c.noSpan {
		o.tracer = c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
	}
	return locker.Observer{Start: o.start, Lock: o.lock, Unlock: o.unlock, Renew: o.renew, Lost: o.lostLease, ForceUnlock: o.forceUnlock}, nil
}

// instruments are the metric instruments of one Observer.
type instruments struct {
	wait, hold, unlock, force, renewal metric.Float64Histogram
	lost, renewed                      metric.Int64Counter
	active, pending                    metric.Int64UpDownCounter
}

// secondsBuckets are the bucket boundaries of the duration histograms, in seconds: 0.5ms to 5
// minutes (OpenTelemetry's default ones are made for milliseconds).
var secondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newInstruments(m metric.Meter) (instruments, error) {
	var err error
	keep := func(name string, e error) {
		if err == nil && e != nil {
			err = fmt.Errorf("lockerotel: %s: %w", name, e)
		}
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, e := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(secondsBuckets...))
		keep(name, e)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		x, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		keep(name, e)
		return x
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		x, e := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		keep(name, e)
		return x
	}
	ins := instruments{
		wait:    hist("locker.lock.wait.duration", "Time of a lock call, from the call to its return."),
		hold:    hist("locker.lock.hold.duration", "Time from a lease's grant to its release by Unlock, or to its loss."),
		unlock:  hist("locker.unlock.duration", "Time of an Unlock call."),
		force:   hist("locker.force_unlock.duration", "Time of a ForceUnlock call."),
		renewal: hist("locker.renewal.duration", "Time of a renewal round trip of the watchdog."),
		lost:    counter("locker.lease.lost", "{lease}", "Leases lost, by cause."),
		renewed: counter("locker.renewal.holds", "{hold}", "Holds in the watchdog's renewals, by outcome."),
		active:  upDown("locker.lease.active", "{lease}", "Leases granted and neither unlocked nor lost."),
		pending: upDown("locker.lock.pending", "{call}", "Lock calls started and not returned."),
	}
	return ins, err
}

// modulePath is this module's path, for moduleVersion.
const modulePath = "github.com/hashlock/locker/otel"

// moduleVersion returns this module's version as the program's build records it: a tag or a
// pseudo-version, "(devel)" when it is the main module, "" when the build says nothing.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == modulePath {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			return d.Version
		}
	}
	return ""
}
