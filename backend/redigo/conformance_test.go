package redigo_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

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
			m := miniredis.NewMiniRedis()
			m.ClockTTL(true)
			t.Cleanup(m.Close)
			p := &redis.Pool{
				MaxIdle: 4,
				DialContext: func(context.Context) (redis.Conn, error) {
					nc, err := m.Dial()
					if err != nil {
						return nil, err
					}
					return redis.NewConn(nc, 0, 0), nil
				},
			}
			t.Cleanup(func() { p.Close() })
			return redigo.New(p)
		},
	})
}
