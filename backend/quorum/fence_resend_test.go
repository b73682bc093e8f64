package quorum_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
)

// lostReply is a node whose first Acquire takes effect but whose reply is lost (the node looks
// unavailable, as one that answered too late does).
type lostReply struct {
	*memory.Backend
	lost atomic.Bool
}

func (n *lostReply) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	a, err := n.Backend.Acquire(ctx, req)
	if err == nil && n.lost.CompareAndSwap(false, true) {
		return locker.Acquisition{}, locker.ErrUnavailable
	}
	return a, err
}

// A fenced acquire sent again reports the token its first send returned, though a node that
// granted the first send without answering drew a larger token of its own.
func TestFencedAcquireSentAgain(t *testing.T) {
	ctx := context.Background()
	late := &lostReply{Backend: memory.New()}
	// The late node's counter is ahead (its tokens come from another history).
	if err := late.RaiseFence(ctx, "k", 100); err != nil {
		t.Fatal(err)
	}
	b := quorum.New(memory.New(), memory.New(), late)
	req := locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Minute, ID: "r1", Fence: true}
	first, err := b.Acquire(ctx, req)
	if err != nil || first.Holds != 1 {
		t.Fatalf("first Acquire = %+v, %v", first, err)
	}
	again, err := b.Acquire(ctx, req)
	if err != nil || again.Holds != 1 {
		t.Fatalf("Acquire sent again = %+v, %v", again, err)
	}
	if again.Token != first.Token {
		t.Fatalf("Acquire sent again reported token %d, the first send %d", again.Token, first.Token)
	}
}
