package redigo_test

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The full suite on a real redis-server, in real time; notices by SSUBSCRIBE.
func TestConformanceRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	conformance.Run(t, conformance.Factory{
		Foreign: srv.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			pool := &redis.Pool{
				MaxIdle: 8,
				DialContext: func(ctx context.Context) (redis.Conn, error) {
					return redis.DialContext(ctx, "tcp", srv.Addr)
				},
			}
			t.Cleanup(func() { pool.Close() })
			return redigo.New(pool)
		},
	})
}
