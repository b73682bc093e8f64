package valkeylocker_test

import (
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker"
	valkeylocker "github.com/hashlock/locker/backend/valkey"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// newClient returns a valkey-go client made with opt, closed with the case, whose mode must be
// want. Real Redis has CLIENT TRACKING, so the client keeps valkey-go's defaults (client-side
// caching on).
func newClient(t conformance.TB, opt valkey.ClientOption, want valkey.ClientMode) valkey.Client {
	c, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatalf("valkey.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	if mode := c.Mode(); mode != want {
		t.Fatalf("client mode %q, want %q", mode, want)
	}
	return c
}

// The full suite on a real redis-server (Redis 7, which valkey-go speaks to as to Valkey), in
// real time: the single-node client (the server refuses CLUSTER SLOTS); notices go by sharded
// pub/sub.
func TestConformanceRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	conformance.Run(t, conformance.Factory{
		Foreign: srv.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			c := newClient(t, valkey.ClientOption{InitAddress: []string{srv.Addr}}, valkey.ClientModeStandalone)
			return valkeylocker.New(c)
		},
	})
}

// The full suite on a real 3-master Redis Cluster: the suite's keys carry no hash tag, so they
// spread over all masters; renewals are grouped by slot and pipelined per node, and sharded
// notices go to the master of their slot (rediscore.SlotMap).
func TestConformanceCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	conformance.Run(t, conformance.Factory{
		Foreign: cluster.Foreign(),
		New: func(t conformance.TB) locker.Locker {
			c := newClient(t, valkey.ClientOption{InitAddress: cluster.Addrs}, valkey.ClientModeCluster)
			return valkeylocker.New(c)
		},
	})
}

// The full suite through a Sentinel client: one master watched by one sentinel. With
// Sentinel.MasterSet set, InitAddress lists sentinels and valkey-go makes its sentinel client,
// which the Backend treats as a single node.
func TestConformanceSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	s := redistest.StartSentinel(t, master)
	conformance.Run(t, conformance.Factory{
		New: func(t conformance.TB) locker.Locker {
			c := newClient(t, valkey.ClientOption{
				InitAddress: []string{s.Addr},
				Sentinel:    valkey.SentinelOption{MasterSet: s.MasterName},
			}, valkey.ClientModeSentinel)
			return valkeylocker.New(c)
		},
	})
}
