package rueidislocker_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/hashlock/locker"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// newClient returns a rueidis client on addrs, closed with the case. Real Redis has CLIENT
// TRACKING, so the client keeps rueidis's defaults (client-side caching on).
func newClient(t conformance.TB, addrs ...string) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// The full suite on a real redis-server, in real time. rueidis makes its single-node client
// (the server refuses CLUSTER SLOTS); notices go by sharded pub/sub (Redis >= 7).
func TestConformanceRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	conformance.Run(t, conformance.Factory{
		Foreign: srv.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			return rueidislocker.New(newClient(t, srv.Addr))
		},
	})
}

// The full suite on a real 3-master Redis Cluster: the suite's keys carry no hash tag, so they
// spread over all masters; renewals are grouped by slot and pipelined per node.
func TestConformanceCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	conformance.Run(t, conformance.Factory{
		Foreign: cluster.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			return rueidislocker.New(newClient(t, cluster.Addrs...))
		},
	})
}
