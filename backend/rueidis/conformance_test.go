package rueidislocker

import (
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/conformance"
)

// miniredis inside a synctest bubble: in-memory connections (Dial), leases on the bubble's
// clock (ClockTTL), so the whole suite runs with exact timing. miniredis has no CLIENT TRACKING:
// the client needs DisableCache. It answers CLUSTER SLOTS, so rueidis makes its cluster client.
func TestConformanceMiniredis(t *testing.T) {
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		New: func(t conformance.TB) locker.Locker {
			return New(newTestServer(t).c)
		},
	})
}
