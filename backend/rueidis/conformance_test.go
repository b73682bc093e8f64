package rueidislocker

import (
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// miniredis inside a synctest bubble: in-memory connections (Dial), leases on the bubble's
// clock (ClockTTL), so the whole suite runs with exact timing. miniredis has no CLIENT TRACKING:
// the client needs DisableCache. It answers CLUSTER SLOTS, so rueidis makes its cluster client.
func TestConformanceMiniredis(t *testing.T) {
	var s *testServer
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		Foreign:  redistest.Foreign(func(args ...string) (any, error) { return redistest.DoDial(s.m.Dial, args...) }),
		New: func(t conformance.TB) locker.Locker {
			s = newTestServer(t)
			return New(s.c, rediscore.WithNoticeLinger(0)) // no connection outlives the bubble
		},
	})
}
