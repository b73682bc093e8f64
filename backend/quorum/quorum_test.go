package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/conformance"
)

// The suite on a quorum of three memory backends, in a synctest bubble.
func TestConformanceMemory(t *testing.T) {
	conformance.Run(t, conformance.Factory{
		New: func(conformance.TB) locker.Locker {
			return quorum.New(memory.New(), memory.New(), memory.New())
		},
		Synctest: true,
	})
}

// A quorum has no shared holds or fair queues: the Client says so, and so does the Backend,
// whose nodes are left untouched.
func TestKindsUnsupported(t *testing.T) {
	nodes := []*memory.Backend{memory.New(), memory.New(), memory.New()}
	b := quorum.New(nodes[0], nodes[1], nodes[2])
	if _, ok := locker.Locker(b).(locker.KindLocker); ok {
		t.Fatal("the quorum claims to be a KindLocker")
	}
	c := locker.New(b)
	defer c.Close()
	ctx := context.Background()
	if _, err := c.RLock(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("RLock = %v, want ErrUnsupported", err)
	}
	if _, err := c.TryLock(ctx, "k", locker.WithFair()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("fair TryLock = %v, want ErrUnsupported", err)
	}
	for _, req := range []locker.AcquireRequest{{Shared: true}, {Fair: true}} {
		req.Key, req.Owner, req.TTL = "k", "o", time.Second
		if _, err := b.Acquire(ctx, req); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Acquire(%+v) = %v, want ErrUnsupported", req, err)
		}
	}
	if _, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o", Shared: true}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("shared Release = %v, want ErrUnsupported", err)
	}
	// A plain Lock that waits leaves no queue entry on the nodes.
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(wctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("second Lock = %v, want ErrNotObtained", err)
	}
	for i, n := range nodes {
		if st, err := n.Inspect(ctx, "k"); err != nil || st.Queued != 0 || !st.Locked {
			t.Fatalf("node %d: %+v, %v: want locked, nobody queued", i, st, err)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}
