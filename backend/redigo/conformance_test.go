package redigo_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// miniredis inside a synctest bubble: in-memory connections (Dial, no DNS), leases on the
// bubble's clock (ClockTTL), so the whole suite runs in about a second with exact timing.
// miniredis has no SSUBSCRIBE, so this also covers the fallback to SUBSCRIBE.
func TestConformanceMiniredis(t *testing.T) {
	var m *miniredis.Miniredis
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		Foreign:  redistest.Foreign(func(args ...string) (any, error) { return redistest.DoDial(m.Dial, args...) }),
		New: func(t conformance.TB) locker.Locker {
			var p *redis.Pool
			m, p = newMiniredis(t)
			return redigo.New(p, rediscore.WithNoticeLinger(0)) // no connection outlives the bubble
		},
	})
}
