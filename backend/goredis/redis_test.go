package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The full suite on a real redis-server, in real time.
func TestConformanceRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	conformance.Run(t, conformance.Factory{
		Foreign: srv.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			return goredis.New(rdb)
		},
	})
}

// The full suite on a real 3-master Redis Cluster: the suite's keys carry no hash tag, so they
// spread over all masters; notices go by sharded pub/sub.
func TestConformanceCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	conformance.Run(t, conformance.Factory{
		Foreign: cluster.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			return goredis.New(rdb)
		},
	})
}
