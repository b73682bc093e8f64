package rueidislocker_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/hashlock/locker"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The full suite through a Sentinel client, in real time: one master watched by one sentinel.
// With Sentinel.MasterSet set, InitAddress lists sentinels and rueidis makes its sentinel client
// (Mode sentinel, so the Backend treats it as a single node); notices go by sharded pub/sub on
// connections dedicated from the master's. Real Redis (sentinel included) has CLIENT TRACKING,
// so the client keeps rueidis's defaults (client-side caching on).
func TestConformanceSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	s := redistest.StartSentinel(t, master)
	conformance.Run(t, conformance.Factory{
		New: func(t conformance.TB) locker.Locker {
			c, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress: []string{s.Addr},
				Sentinel:    rueidis.SentinelOption{MasterSet: s.MasterName},
			})
			if err != nil {
				t.Fatalf("rueidis.NewClient (sentinel): %v", err)
			}
			t.Cleanup(c.Close)
			if m := c.Mode(); m != rueidis.ClientModeSentinel {
				t.Fatalf("client mode %q, want %q", m, rueidis.ClientModeSentinel)
			}
			return rueidislocker.New(c)
		},
	})
}
