package redistest

import "github.com/alicebob/miniredis/v2"

// Miniredis returns an in-process miniredis for one test case, closed in cleanup. Its leases
// follow the time package's clock (ClockTTL): inside a testing/synctest bubble, the bubble's
// fake clock. Connect to it with its Dial method, which needs no TCP listener and no DNS lookup
// and so keeps client and server inside the bubble. miniredis has no SPUBLISH/SSUBSCRIBE and
// no CLIENT TRACKING.
func Miniredis(t interface{ Cleanup(func()) }) *miniredis.Miniredis {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	t.Cleanup(m.Close)
	return m
}
