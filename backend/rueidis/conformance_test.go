package rueidislocker_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/hashlock/locker"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	"github.com/hashlock/locker/conformance"
)

// miniredis inside a synctest bubble: in-memory connections (Dial), leases on the bubble's
// clock (ClockTTL), so the whole suite runs with exact timing. miniredis has no CLIENT TRACKING:
// the client needs DisableCache. It answers CLUSTER SLOTS, so rueidis makes its cluster client.
func TestConformanceMiniredis(t *testing.T) {
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		New: func(t conformance.TB) locker.Locker {
			m := miniredis.NewMiniRedis()
			m.ClockTTL(true)
			t.Cleanup(m.Close)
			c, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress:  []string{"127.0.0.1:0"}, // an IP literal: no DNS lookup
				DisableCache: true,
				DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
					return m.Dial()
				},
			})
			if err != nil {
				t.Fatalf("rueidis.NewClient: %v", err)
			}
			t.Cleanup(func() {
				c.Close()
				// The cluster client's Close closes its connections in goroutines and
				// returns; a connection that breaks first (miniredis closing) schedules a
				// topology refresh after a random delay of up to 1s. Let the bubble's
				// clock run past both, so that no goroutine outlives the case.
				time.Sleep(2 * time.Second)
			})
			return rueidislocker.New(c)
		},
	})
}
