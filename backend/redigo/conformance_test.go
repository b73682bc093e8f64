package redigo_test

import (
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/conformance"
)

// miniredis inside a synctest bubble: in-memory connections (Dial, no DNS), leases on the
// bubble's clock (ClockTTL), so the whole suite runs in about a second with exact timing.
// miniredis has no SSUBSCRIBE, so this also covers the fallback to SUBSCRIBE.
func TestConformanceMiniredis(t *testing.T) {
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		New: func(t conformance.TB) locker.Locker {
			_, p := newMiniredis(t)
			return redigo.New(p)
		},
	})
}
