package quorum_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
)

// counted is a node that counts its calls.
type counted struct {
	locker.Locker
	acquires, releases, inspects atomic.Int64
}

func (c *counted) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	c.acquires.Add(1)
	return c.Locker.Acquire(ctx, req)
}

func (c *counted) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	c.releases.Add(1)
	return c.Locker.Release(ctx, req)
}

func (c *counted) Inspect(ctx context.Context, key string) (locker.State, error) {
	c.inspects.Add(1)
	return c.Locker.Inspect(ctx, key)
}

// Two clients naming the same nodes in another order share the locks: a node that lost its data
// makes a mixed acquire, whose refusing nodes carry the same configuration, so the other client
// is refused as usual (ErrNotObtained, not ErrNodeSet); it gets the lock once it is free, and
// Inspect reports the caller's own owner token.
func TestNamesAnyOrder(t *testing.T) {
	ns := []*node{newNode(), newNode(), newNode()}
	a := quorum.NewConfig(quorum.Config{Nodes: []locker.Locker{ns[0], ns[1], ns[2]}, Names: []string{"a", "b", "c"}})
	c := quorum.NewConfig(quorum.Config{Nodes: []locker.Locker{ns[2], ns[0], ns[1]}, Names: []string{"c", "a", "b"}})
	ca, cc := client(t, a), client(t, c)
	ctx := context.Background()
	held, err := ca.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	ns[0].restartEmpty()
	if l, err := cc.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("the other order's TryLock = %v, %v; want ErrNotObtained", l, err)
	}
	if st, err := c.Inspect(ctx, "k"); err != nil || st.Owner != held.Owner() {
		t.Fatalf("Inspect through the other order = %+v, %v; want the holder's owner token", st, err)
	}
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	l, err := cc.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("the other order after Unlock: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// A client of one node alone holding the key refuses a quorum's acquire with ErrNodeSet: the
// quorum would otherwise hold it on the two other nodes.
func TestUnmarkedHolder(t *testing.T) {
	ns, b := threeNodes(quorum.Config{})
	ctx := context.Background()
	single, err := client(t, ns[2]).Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	l, err := client(t, b).TryLock(ctx, "k")
	if !errors.Is(err, quorum.ErrNodeSet) || !strings.Contains(err.Error(), "a client of that server alone") {
		t.Fatalf("the quorum's TryLock while one node's client holds = %v, %v; want ErrNodeSet", l, err)
	}
	for i, n := range ns[:2] {
		if st := n.inspect(t, "k"); st.Locked {
			t.Fatalf("node %d holds the key after the refused acquire: %+v", i, st)
		}
	}
	if err := single.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// The check costs nothing on the uncontended path (one Acquire and one Release per node for a
// Lock and Unlock, no Inspect), nor when every node refuses; a mixed acquire inspects only the
// refusing nodes.
func TestNodeSetRoundTrips(t *testing.T) {
	cs := []*counted{{Locker: memory.New()}, {Locker: memory.New()}, {Locker: memory.New()}}
	b := quorum.New(cs[0], cs[1], cs[2])
	c, other := client(t, b), client(t, b)
	ctx := context.Background()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("another owner's TryLock: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	for i, n := range cs {
		if a, r, in := n.acquires.Load(), n.releases.Load(), n.inspects.Load(); a != 2 || r != 1 || in != 0 {
			t.Errorf("node %d: %d acquires, %d releases, %d inspects; want 2, 1, 0", i, a, r, in)
		}
	}

	l, err = c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if _, err := cs[0].ForceRelease(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("another owner's TryLock with node 0 emptied: %v", err)
	}
	if in := []int64{cs[0].inspects.Load(), cs[1].inspects.Load(), cs[2].inspects.Load()}; in[0] != 0 || in[1] != 1 || in[2] != 1 {
		t.Errorf("inspects per node after a mixed acquire = %v, want [0 1 1]", in)
	}
}

// Invalid names fail every call with ErrInvalid.
func TestInvalidNames(t *testing.T) {
	nodes := []locker.Locker{memory.New(), memory.New(), memory.New()}
	for name, names := range map[string][]string{
		"too few":    {"a", "b"},
		"empty name": {"a", "", "c"},
		"same name":  {"a", "b", "a"},
	} {
		b := quorum.NewConfig(quorum.Config{Nodes: nodes, Names: names})
		if _, err := b.Acquire(context.Background(), locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("%s: Acquire = %v, want ErrInvalid", name, err)
		}
	}
}
