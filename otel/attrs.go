package lockerotel

import (
	"context"
	"errors"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hashlock/locker"
)

// Attribute keys.
const (
	// KindKey is "exclusive" (Lock, TryLock) or "shared" (RLock, TryRLock).
	KindKey = attribute.Key("locker.kind")
	// TryKey is true for TryLock and TryRLock (calls that do not wait).
	TryKey = attribute.Key("locker.try")
	// OutcomeKey is a lock call's outcome: locker.Outcome's String ("acquired", "reentered",
	// "not_obtained", "canceled", "error").
	OutcomeKey = attribute.Key("locker.outcome")
	// ErrorTypeKey is the conventions' error.type: the class of a call's error (see ErrorType),
	// absent when the call succeeded, and on a TryLock's or TryRLock's refusal (its answer).
	ErrorTypeKey = attribute.Key("error.type")
	// CauseKey is how a lease was lost: locker.LostCause's String ("expired", "gone", "forced").
	CauseKey = attribute.Key("locker.lost.cause")
	// RenewalKey is a renewed hold's outcome: "renewed", "gone" or "failed".
	RenewalKey = attribute.Key("locker.renewal.outcome")
	// RemovedKey is ForceUnlock's bool: there was a lock to delete (absent on an error).
	RemovedKey = attribute.Key("locker.force_unlock.removed")
	// LabelKey is the label WithKeyLabel's function gives a key (or OtherLabel); absent
	// without it, or when the function returns "".
	LabelKey = attribute.Key("locker.key.label")
)

// OtherLabel is the key label recorded for the labels past WithKeyLabelLimit, and by OnlyLabels
// for those not allowed.
const OtherLabel = "_other"

// ErrorType returns the value of error.type for err: "" for nil; else the first that err
// wraps of "lock_lost", "closed", "timeout" (context.DeadlineExceeded), "canceled",
// "unavailable", "not_obtained", "upgrade", "invalid", "not_a_lock", "not_held" and
// "unsupported" (errors.ErrUnsupported); else "_OTHER" (a backend's own error).
func ErrorType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, locker.ErrLockLost):
		return "lock_lost"
	case errors.Is(err, locker.ErrClosed):
		return "closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, locker.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, locker.ErrNotObtained):
		return "not_obtained"
	case errors.Is(err, locker.ErrUpgrade):
		return "upgrade"
	case errors.Is(err, locker.ErrInvalid):
		return "invalid"
	case errors.Is(err, locker.ErrNotALock):
		return "not_a_lock"
	case errors.Is(err, locker.ErrNotHeld):
		return "not_held"
	case errors.Is(err, errors.ErrUnsupported):
		return "unsupported"
	}
	return "_OTHER"
}

// KeyPrefix returns a label function for WithKeyLabel that keeps the part of a key before the
// first sep ("invoice:42" gives "invoice" with sep ":"), and "" (no label) for a key without
// sep. Use it only where the first part names a kind of lock: on "user-123:profile" it makes a
// label per user (the Observer caps them: WithKeyLabelLimit; see also OnlyLabels).
func KeyPrefix(sep string) func(key string) string {
	return func(key string) string {
		if i := strings.Index(key, sep); i >= 0 && sep != "" {
			return key[:i]
		}
		return ""
	}
}

// OnlyLabels returns a label function for WithKeyLabel that gives label(key) when it is one of
// allowed (or ""), and OtherLabel otherwise: an allow-list of the kinds of lock worth a series.
func OnlyLabels(label func(key string) string, allowed ...string) func(key string) string {
	set := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		set[a] = true
	}
	return func(key string) string {
		if l := label(key); l == "" || set[l] {
			return l
		}
		return OtherLabel
	}
}

// attrKey names one attribute set of an Observer; a field's zero value leaves its attribute out.
type attrKey struct {
	label   string
	kind    uint8 // 1: exclusive, 2: shared
	try     uint8 // 1: false, 2: true
	outcome locker.Outcome
	errType string
	cause   locker.LostCause
	renewal string
	removed uint8 // 1: false, 2: true
}

// attrSet is an attribute set made once, in the forms the instruments and spans take.
type attrSet struct {
	rec []metric.RecordOption
	add []metric.AddOption
	kvs []attribute.KeyValue // for a span or an event: do not modify
}

// attrs holds an Observer's attribute sets, made on first use: a few per label, the labels
// bounded by the limit.
type attrs struct {
	label func(string) string  // WithKeyLabel; nil: none
	limit int                  // WithKeyLabelLimit
	fixed []attribute.KeyValue // WithAttributes

	mu     sync.RWMutex
	sets   map[attrKey]*attrSet
	labels map[string]struct{} // the labels admitted, at most limit
}

// labelOf returns the label of key: "" without one, OtherLabel past the limit.
func (a *attrs) labelOf(key string) string {
	if a.label == nil {
		return ""
	}
	l := a.label(key)
	if l == "" || l == OtherLabel {
		return l
	}
	a.mu.RLock()
	_, ok := a.labels[l]
	full := len(a.labels) >= a.limit
	a.mu.RUnlock()
	switch {
	case ok:
		return l
	case full:
		return OtherLabel
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.labels[l]; !ok {
		if len(a.labels) >= a.limit {
			return OtherLabel
		}
		l = strings.Clone(l) // not a piece of a key the map would keep alive
		a.labels[l] = struct{}{}
	}
	return l
}

// set returns the attribute set k names; k.label must come from labelOf.
func (a *attrs) set(k attrKey) *attrSet {
	a.mu.RLock()
	s := a.sets[k]
	a.mu.RUnlock()
	if s != nil {
		return s
	}
	kvs := append([]attribute.KeyValue(nil), a.fixed...)
	if k.label != "" {
		k.label = strings.Clone(k.label)
		kvs = append(kvs, LabelKey.String(k.label))
	}
	switch k.kind {
	case 1:
		kvs = append(kvs, KindKey.String("exclusive"))
	case 2:
		kvs = append(kvs, KindKey.String("shared"))
	}
	if k.try > 0 {
		kvs = append(kvs, TryKey.Bool(k.try == 2))
	}
	if k.outcome > 0 {
		kvs = append(kvs, OutcomeKey.String(k.outcome.String()))
	}
	if k.errType != "" {
		kvs = append(kvs, ErrorTypeKey.String(k.errType))
	}
	if k.cause > 0 {
		kvs = append(kvs, CauseKey.String(k.cause.String()))
	}
	if k.renewal != "" {
		kvs = append(kvs, RenewalKey.String(k.renewal))
	}
	if k.removed > 0 {
		kvs = append(kvs, RemovedKey.Bool(k.removed == 2))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	s = &attrSet{rec: []metric.RecordOption{opt}, add: []metric.AddOption{opt}, kvs: kvs}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old := a.sets[k]; old != nil {
		return old
	}
	a.sets[k] = s
	return s
}

// kindOf is attrKey.kind for a shared or exclusive hold.
func kindOf(shared bool) uint8 {
	if shared {
		return 2
	}
	return 1
}

// boolOf is attrKey.try or removed for b.
func boolOf(b bool) uint8 {
	if b {
		return 2
	}
	return 1
}
