package valkeylocker_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	valkeylocker "github.com/hashlock/locker/backend/valkey"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// miniredis inside a synctest bubble: in-memory connections (DialCtxFn over Dial), leases on
// the bubble's clock (ClockTTL), so the whole suite runs with exact timing. miniredis has no
// CLIENT TRACKING (DisableCache) and answers CLUSTER SLOTS (ForceSingleClient keeps the client
// single-node; the cluster client is tested on a real cluster, redis_test.go).
func TestConformanceMiniredis(t *testing.T) {
	var m *miniredis.Miniredis
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		Foreign:  redistest.Foreign(func(args ...string) (any, error) { return redistest.DoDial(m.Dial, args...) }),
		New: func(t conformance.TB) locker.Locker {
			m = redistest.Miniredis(t)
			c, err := valkey.NewClient(valkey.ClientOption{
				InitAddress:       []string{"127.0.0.1:0"},
				DisableCache:      true,
				ForceSingleClient: true,
				DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
					return m.Dial()
				},
			})
			if err != nil {
				t.Fatalf("valkey.NewClient: %v", err)
			}
			t.Cleanup(c.Close)
			if mode := c.Mode(); mode != valkey.ClientModeStandalone {
				t.Fatalf("client mode %q, want %q", mode, valkey.ClientModeStandalone)
			}
			return valkeylocker.New(c, rediscore.WithNoticeLinger(0)) // no connection outlives the bubble
		},
	})
}
