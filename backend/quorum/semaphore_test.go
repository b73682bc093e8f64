package quorum_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
)

// A quorum has no semaphores: Client.Acquire and TryAcquire, and the Backend's Acquire with a
// Limit, return an error wrapping errors.ErrUnsupported without a call to any node.
func TestSemaphoresUnsupported(t *testing.T) {
	cs := []*counted{{Locker: memory.New()}, {Locker: memory.New()}, {Locker: memory.New()}}
	b := quorum.New(cs[0], cs[1], cs[2])
	if _, ok := locker.Locker(b).(locker.Semaphorer); ok {
		t.Fatal("the quorum claims to be a Semaphorer")
	}
	c := client(t, b)
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "k", 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Acquire = %v, want ErrUnsupported", err)
	}
	if _, err := c.TryAcquire(ctx, "k", 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryAcquire = %v, want ErrUnsupported", err)
	}
	req := locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, Limit: 2}
	if _, err := b.Acquire(ctx, req); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Acquire(%+v) = %v, want ErrUnsupported", req, err)
	}
	for i, n := range cs {
		if a := n.acquires.Load(); a != 0 {
			t.Errorf("node %d got %d acquires, want none", i, a)
		}
	}
}

// Inspect reports the quorum's one holder in Holders, with the majority's hold count and lease.
func TestInspectHolders(t *testing.T) {
	_, b := threeNodes(quorum.Config{})
	c := client(t, b, locker.WithTTL(10*time.Second))
	ctx := context.Background()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	again, err := c.Lock(l.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Unlock()
	st, err := b.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0] != (locker.Holder{Owner: l.Owner(), Holds: 2, TTL: st.TTL}) || st.TTL <= 0 || st.TTL > 10*time.Second {
		t.Fatalf("Inspect = %+v; want one holder, %s with 2 holds and the lease", st, l.Owner())
	}
	if err := again.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(ctx, "k"); err != nil || st.Locked || st.Holders != nil {
		t.Fatalf("Inspect after the unlocks = %+v, %v; want the zero State", st, err)
	}
}

// A key held on the nodes as a semaphore (someone else's use: the quorum takes none) is treated
// as one held shared is: held on every node, the quorum's lock is refused (ErrNotObtained, not
// ErrUnavailable) and Inspect reports it held by one of the permits' holders, as a lock; held on
// one node, the others' grants are taken back and the acquire fails with ErrNodeSet, which says
// how that node holds it.
func TestNodeSemaphore(t *testing.T) {
	nodes := []*memory.Backend{memory.New(), memory.New(), memory.New()}
	b := quorum.New(nodes[0], nodes[1], nodes[2])
	c := client(t, b)
	ctx := context.Background()
	permit := func(n *memory.Backend, key string) {
		t.Helper()
		req := locker.AcquireRequest{Key: key, Owner: "sem-a", TTL: 10 * time.Second, Limit: 2}
		if a, err := n.Acquire(ctx, req); err != nil || a.Holds != 1 {
			t.Fatalf("a permit on a node: %+v, %v", a, err)
		}
	}

	for _, n := range nodes {
		permit(n, "everywhere")
	}
	if l, err := c.TryLock(ctx, "everywhere"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("TryLock of a key held as a semaphore on every node = %v, %v; want ErrNotObtained", l, err)
	}
	st, err := b.Inspect(ctx, "everywhere")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Locked || st.Owner != "sem-a" || st.Holds != 1 || st.Shared || st.Limit != 0 ||
		len(st.Holders) != 1 || st.Holders[0] != (locker.Holder{Owner: "sem-a", Holds: 1, TTL: st.TTL}) {
		t.Fatalf("Inspect = %+v; want held by sem-a, 1 hold, as a lock (no Limit, one holder)", st)
	}
	for i, n := range nodes {
		if st, err := n.Inspect(ctx, "everywhere"); err != nil || st.Limit != 2 || len(st.Holders) != 1 {
			t.Errorf("node %d after the refused lock: %+v, %v; want the semaphore as it was", i, st, err)
		}
	}

	permit(nodes[2], "one")
	l, err := c.TryLock(ctx, "one")
	if !errors.Is(err, quorum.ErrNodeSet) || !strings.Contains(err.Error(), "a client of that server alone, not of a quorum (as a semaphore of 2)") {
		t.Fatalf("TryLock of a key held as a semaphore on one node = %v, %v; want ErrNodeSet saying so", l, err)
	}
	for i, n := range nodes[:2] {
		if st, err := n.Inspect(ctx, "one"); err != nil || st.Locked {
			t.Errorf("node %d after the refused lock: %+v, %v; want it free (taken back)", i, st, err)
		}
	}
}
