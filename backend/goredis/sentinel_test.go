package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The full suite through a failover (Sentinel) client, in real time: one master watched by one
// sentinel, which the client asks for the master's address. The failover client is a
// *redis.Client, so the Backend treats it as a single node; notices go by sharded pub/sub.
func TestConformanceSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	s := redistest.StartSentinel(t, master)
	conformance.Run(t, conformance.Factory{
		Foreign: master.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			rdb := redis.NewFailoverClient(&redis.FailoverOptions{
				MasterName:            s.MasterName,
				SentinelAddrs:         []string{s.Addr},
				ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { rdb.Close() })
			return goredis.New(rdb)
		},
	})
}
