package quorum_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// goredisNode returns a go-redis backend on addr, closed with the test.
func goredisNode(t *testing.T, addr string) locker.Locker {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return goredis.New(rdb)
}

// startServers starts n redis-servers.
func startServers(t *testing.T, n int) []*redistest.Server {
	servers := make([]*redistest.Server, n)
	for i := range servers {
		servers[i] = redistest.StartServer(t)
	}
	return servers
}

// quorumOn returns a Client on a quorum of go-redis nodes on servers, with names when named.
func quorumOn(t *testing.T, named bool, servers ...*redistest.Server) *locker.Client {
	cfg := quorum.Config{NodeTimeout: 2 * time.Second}
	for _, s := range servers {
		cfg.Nodes = append(cfg.Nodes, goredisNode(t, s.Addr))
		if named {
			cfg.Names = append(cfg.Names, s.Addr)
		}
	}
	c := locker.New(quorum.NewConfig(cfg), locker.WithTTL(30*time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// holdsOnly checks that holder still holds key, and that no server of others has key at all
// (a refused acquire was taken back).
func holdsOnly(t *testing.T, holder *locker.Lease, key string, others ...*redistest.Server) {
	t.Helper()
	if err := context.Cause(holder.Context()); err != nil {
		t.Fatalf("the holder's lease ended: %v", err)
	}
	for _, s := range others {
		if exists(t, s, key) {
			t.Fatalf("%s still has %q after the refused acquire", s.Addr, key)
		}
	}
}

// Client A on [n1,n2,n3] and B on [n3,n4,n5], in this order (the case): whichever locks
// first, the other's TryLock and Lock fail at once with ErrNodeSet, and never both hold. With
// Config.Names, B on [n4,n5,n3] (n3 at the same position) is refused too.
func TestDisjointNodeSets(t *testing.T) {
	n := startServers(t, 5)
	for _, c := range []struct {
		name  string
		named bool
		b     []*redistest.Server
	}{
		{"positions", false, []*redistest.Server{n[2], n[3], n[4]}},
		{"names", true, []*redistest.Server{n[3], n[4], n[2]}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := quorumOn(t, c.named, n[0], n[1], n[2]), quorumOn(t, c.named, c.b...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := "disjoint-" + c.name

			held, err := a.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if l, err := b.TryLock(ctx, key); !errors.Is(err, quorum.ErrNodeSet) {
				t.Fatalf("B's TryLock while A holds = %v, %v; want ErrNodeSet", l, err)
			}
			if l, err := b.Lock(ctx, key); !errors.Is(err, quorum.ErrNodeSet) || ctx.Err() != nil {
				t.Fatalf("B's Lock while A holds = %v, %v; want ErrNodeSet before its ctx ends", l, err)
			}
			holdsOnly(t, held, key, n[3], n[4])
			if err := held.Unlock(); err != nil {
				t.Fatal(err)
			}

			held, err = b.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if l, err := a.TryLock(ctx, key); !errors.Is(err, quorum.ErrNodeSet) {
				t.Fatalf("A's TryLock while B holds = %v, %v; want ErrNodeSet", l, err)
			}
			holdsOnly(t, held, key, n[0], n[1])
			if err := held.Unlock(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Client A on 3 nodes and B on 5 overlapping ones: while A holds, B is refused with ErrNodeSet,
// also after one of the shared servers lost its data (FLUSHALL), when B would otherwise win 3 of
// its 5 nodes.
func TestThreeAndFiveNodes(t *testing.T) {
	n := startServers(t, 5)
	a, b := quorumOn(t, false, n[0], n[1], n[2]), quorumOn(t, false, n...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	before, err := b.TryLock(ctx, "k")
	if err == nil {
		t.Fatalf("B (5 nodes) got the lock while A (3 nodes) holds it: %v", before)
	}
	if !errors.Is(err, quorum.ErrNodeSet) {
		t.Errorf("B (5 nodes) while A (3 nodes) holds = %v; want ErrNodeSet", err)
	}
	n[0].Do(t, "FLUSHALL")
	l, err := b.TryLock(ctx, "k")
	if !errors.Is(err, quorum.ErrNodeSet) {
		t.Fatalf("B (5 nodes) after n1 lost its data = %v, %v; want ErrNodeSet", l, err)
	}
	t.Logf("after FLUSHALL: %v", err)
	if !strings.Contains(err.Error(), "quorum of 3 nodes; this one has 5") {
		t.Errorf("the error does not say what differs: %v", err)
	}
	holdsOnly(t, held, "k", n[0], n[3], n[4])
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// One server under two names (127.0.0.1:port and localhost:port) would count twice: the first
// Lock fails with ErrNodeSet, naming the two nodes, and leaves nothing on the servers; also with
// WithOwner, whose acquires leave request markers (one per node: the second name's acquire must
// not find the first's marker and report its grant).
func TestSameServerTwoNames(t *testing.T) {
	if _, err := net.LookupHost("localhost"); err != nil {
		t.Skipf("localhost does not resolve: %v", err)
	}
	n := startServers(t, 2)
	other := "localhost:" + strconv.Itoa(n[0].Port)
	for _, c := range []struct {
		named bool
		opts  []locker.Option
	}{{false, nil}, {true, nil}, {false, []locker.Option{locker.WithOwner("shared-owner")}}} {
		named := c.named
		cfg := quorum.Config{Nodes: []locker.Locker{goredisNode(t, n[0].Addr), goredisNode(t, other), goredisNode(t, n[1].Addr)}}
		if named {
			cfg.Names = []string{n[0].Addr, other, n[1].Addr}
		}
		cl := locker.New(quorum.NewConfig(cfg), c.opts...)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := cl.Lock(ctx, "k")
		if !errors.Is(err, quorum.ErrNodeSet) {
			t.Fatalf("named %v: Lock on one server given twice = %v, %v; want ErrNodeSet", named, l, err)
		}
		t.Logf("named %v: %v", named, err)
		if !strings.Contains(err.Error(), "are one server") {
			t.Errorf("named %v: the error does not say that two nodes are one server: %v", named, err)
		}
		for _, s := range n {
			if exists(t, s, "k") {
				t.Fatalf("named %v: %s still has the key after the refused Lock", named, s.Addr)
			}
		}
	}
}
