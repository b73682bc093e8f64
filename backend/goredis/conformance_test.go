package goredis_test

import (
	"context"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// miniredis inside a synctest bubble: in-memory connections (Dial), leases on the bubble's
// clock (ClockTTL), so the whole suite runs in about a second with exact timing.
func TestConformanceMiniredis(t *testing.T) {
	var m *miniredis.Miniredis
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		Foreign:  redistest.Foreign(func(args ...string) (any, error) { return redistest.DoDial(m.Dial, args...) }),
		New: func(t conformance.TB) locker.Locker {
			m = redistest.Miniredis(t)
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0", Dialer: func(context.Context, string, string) (net.Conn, error) { return m.Dial() }})
			t.Cleanup(func() { rdb.Close() })
			return goredis.New(rdb, rediscore.WithNoticeLinger(0)) // no connection outlives the bubble
		},
	})
}
