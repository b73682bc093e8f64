package lockerotel

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hashlock/locker"
)

// observer is what NewObserver returns the funcs of.
type observer struct {
	attrs
	ins    instruments
	tracer trace.Tracer // nil: no spans (WithSpans(false))
}

// call is the ctx that start returns with a span: lock finds the span, and the key's label, in
// it (under the key o, so that two Observers of a Client each find their own).
type call struct {
	context.Context
	o     *observer
	span  trace.Span
	label string
}

func (c *call) Value(key any) any {
	if k, ok := key.(*observer); ok && k == c.o {
		return c
	}
	return c.Context.Value(key)
}

// spanNames are the names of the lock calls' spans: [shared][try].
var spanNames = [2][2]string{{"locker.Lock", "locker.TryLock"}, {"locker.RLock", "locker.TryRLock"}}

func (o *observer) start(ctx context.Context, e locker.StartEvent) context.Context {
	label := o.labelOf(e.Key)
	s := o.set(attrKey{label: label, kind: kindOf(e.Shared), try: boolOf(e.Try)})
	o.ins.pending.Add(ctx, 1, s.add...)
	if o.tracer == nil {
		return nil // ctx, at no cost
	}
	ctx, span := o.tracer.Start(ctx, spanNames[kindOf(e.Shared)-1][boolOf(e.Try)-1],
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(s.kvs...))
	return &call{Context: ctx, o: o, span: span, label: label}
}

func (o *observer) lock(ctx context.Context, e locker.LockEvent) {
	c, _ := ctx.Value(o).(*call)
	var label string
	if c != nil {
		label = c.label
	} else {
		label = o.labelOf(e.Key)
	}
	kind, try := kindOf(e.Shared), boolOf(e.Try)
	var errType string
	if e.Err != nil && (!e.Try || e.Outcome != locker.NotObtained) { // a refusal is TryLock's answer
		errType = ErrorType(e.Err)
	}
	o.ins.pending.Add(ctx, -1, o.set(attrKey{label: label, kind: kind, try: try}).add...)
	o.ins.wait.Record(ctx, e.Wait.Seconds(), o.set(attrKey{label: label, kind: kind, try: try, outcome: e.Outcome, errType: errType}).rec...)
	if e.Lease != nil {
		o.ins.active.Add(ctx, 1, o.set(attrKey{label: label, kind: kind}).add...)
	}
	if c == nil {
		return
	}
	c.span.SetAttributes(OutcomeKey.String(e.Outcome.String()))
	if errType != "" {
		c.span.SetAttributes(ErrorTypeKey.String(errType))
		c.span.SetStatus(codes.Error, o.describe(errType, e.Err))
	}
	c.span.End()
}

// describe returns the status description of a span that ended with err: its message, which
// names the key, only when the user opted into key labels; its error.type otherwise.
func (o *observer) describe(errType string, err error) string {
	if o.label == nil {
		return errType
	}
	return err.Error()
}

func (o *observer) unlock(ctx context.Context, e locker.UnlockEvent) {
	label, kind := o.labelOf(e.Lease.Key()), kindOf(e.Lease.Shared())
	s := o.set(attrKey{label: label, kind: kind, errType: ErrorType(e.Err)})
	o.ins.unlock.Record(ctx, e.Duration.Seconds(), s.rec...)
	if !e.Lost { // else counted out, its hold recorded, at the loss
		o.ins.hold.Record(ctx, e.Held.Seconds(), s.rec...)
		o.ins.active.Add(ctx, -1, o.set(attrKey{label: label, kind: kind}).add...)
	}
}

func (o *observer) lostLease(ctx context.Context, e locker.LostEvent) {
	label, kind := o.labelOf(e.Lease.Key()), kindOf(e.Lease.Shared())
	o.ins.active.Add(ctx, -1, o.set(attrKey{label: label, kind: kind}).add...)
	o.ins.hold.Record(ctx, e.Held.Seconds(), o.set(attrKey{label: label, kind: kind, errType: "lock_lost"}).rec...)
	s := o.set(attrKey{label: label, kind: kind, cause: e.Cause})
	o.ins.lost.Add(ctx, 1, s.add...)
	if o.tracer != nil {
		if span := trace.SpanFromContext(ctx); span.IsRecording() { // the caller's, that Lock's ctx had
			span.AddEvent("locker.lease.lost", trace.WithAttributes(s.kvs...))
		}
	}
}

// renewalNames are the values of RenewalKey, in the order of renew's counts.
var renewalNames = [3]string{"renewed", "gone", "failed"}

func (o *observer) renew(ctx context.Context, e locker.RenewEvent) {
	var errType string
	if e.Failed > 0 {
		errType = ErrorType(e.Err)
	}
	o.ins.renewal.Record(ctx, e.Duration.Seconds(), o.set(attrKey{errType: errType}).rec...)
	for i, n := range [...]int{e.Renewed, e.Gone, e.Failed} {
		if n > 0 {
			o.ins.renewed.Add(ctx, int64(n), o.set(attrKey{renewal: renewalNames[i]}).add...)
		}
	}
}

func (o *observer) forceUnlock(ctx context.Context, e locker.ForceUnlockEvent) {
	k := attrKey{label: o.labelOf(e.Key), errType: ErrorType(e.Err)}
	if e.Err == nil {
		k.removed = boolOf(e.Removed)
	}
	o.ins.force.Record(ctx, e.Duration.Seconds(), o.set(k).rec...)
}
