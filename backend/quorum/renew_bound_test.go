package quorum_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
)

// slowRenew is a node that takes perEntry per renewal of a batch, as a server renewing many
// leases in one call does.
type slowRenew struct {
	*memory.Backend
	perEntry time.Duration
}

func (n *slowRenew) Renew(ctx context.Context, batch []locker.Renewal) []error {
	select {
	case <-time.After(time.Duration(len(batch)) * n.perEntry):
		return n.Backend.Renew(ctx, batch)
	case <-ctx.Done():
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = fmt.Errorf("%w: %w", locker.ErrUnavailable, ctx.Err())
		}
		return errs
	}
}

// A batch of renewals gets one node timeout per 512 entries: 2,048 leases that take each node
// 1.5 node timeouts to renew are renewed (with one node timeout for the whole batch, every
// lease was lost).
func TestRenewBatchBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const leases, timeout = 2048, 100 * time.Millisecond
		perEntry := timeout * 3 / 2 / leases
		nodes := make([]locker.Locker, 3)
		for i := range nodes {
			nodes[i] = &slowRenew{Backend: memory.New(), perEntry: perEntry}
		}
		b := quorum.NewConfig(quorum.Config{Nodes: nodes, NodeTimeout: timeout})
		ctx := context.Background()
		batch := make([]locker.Renewal, leases)
		for i := range batch {
			req := locker.AcquireRequest{Key: fmt.Sprint("k", i), Owner: "o", TTL: time.Minute}
			if a, err := b.Acquire(ctx, req); err != nil || !a.Acquired() {
				t.Fatalf("Acquire %d = %+v, %v", i, a, err)
			}
			batch[i] = locker.Renewal{Key: req.Key, Owner: req.Owner, TTL: time.Minute}
		}
		for i, err := range b.Renew(ctx, batch) {
			if err != nil {
				t.Fatalf("renewal %d of %d: %v, want renewed", i, leases, err)
			}
		}
	})
}
