package rediscore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// RenewScript is lua/renew.lua, which Renew runs; the file describes its keys, arguments and reply.
var RenewScript = newScript("renew", renewLua)

//go:embed lua/renew.lua
var renewLua string

// maxBatch is the most keys one renewal script call carries.
const maxBatch = 512

// Renew implements locker.Locker with renew.lua: one call per group of keys that share a
// cluster slot (any keys when not on a cluster), up to maxBatch keys a call, all calls in one
// EvalBatch. With WithReplicaAck, each call is followed by WAIT (acknowledgedBatch), and the renewals
// of a call that too few replicas acknowledged fail with an error wrapping locker.ErrUnavailable
// and ErrNotReplicated: they happened on the master, but the Client counts them as unknown, so a
// lease that the replicas stop confirming ends, as it would in a partition, instead of outliving
// what a promoted replica knows.
func (b *Backend) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := make([]error, len(batch))
	if b.opts.err != nil {
		for i := range errs {
			errs[i] = b.opts.err
		}
		return errs
	}
	groups := b.group(batch)
	calls := make([]Call, len(groups))
	for i, g := range groups {
		c := Call{Keys: make([]string, len(g)), Args: make([]string, 0, 2*len(g))}
		for j, idx := range g {
			r := batch[idx]
			c.Keys[j] = r.Key
			c.Args = append(c.Args, r.Owner, millis(r.TTL))
		}
		calls[i] = c
	}
	results := b.writeBatch(ctx, RenewScript, calls)
	for i, g := range groups {
		var res Result
		if i < len(results) {
			res = results[i]
		} else {
			res.Err = fmt.Errorf("driver returned %d results for %d calls", len(results), len(calls))
		}
		for j, idx := range g {
			switch {
			case res.Err != nil:
				errs[idx] = b.fail(ctx, "renew", res.Err)
			case j >= len(res.Reply.Array):
				errs[idx] = fmt.Errorf("%s: renew: short reply %v", b.prefix, res.Reply.Array)
			case res.Reply.Array[j] != 1:
				errs[idx] = display.Errorf("%s: renew: %w", b.prefix, locker.ErrNotHeld)
			}
		}
	}
	return errs
}

// group splits the indexes of batch into script calls: by slot on a cluster, in order, at most
// maxBatch each.
func (b *Backend) group(batch []locker.Renewal) [][]int {
	var groups [][]int
	if !b.d.Cluster() {
		for start := 0; start < len(batch); start += maxBatch {
			g := make([]int, 0, min(maxBatch, len(batch)-start))
			for i := start; i < len(batch) && i < start+maxBatch; i++ {
				g = append(g, i)
			}
			groups = append(groups, g)
		}
		return groups
	}
	open := make(map[uint16]int) // slot -> index in groups of its newest group
	for i, r := range batch {
		s := Slot(r.Key)
		gi, ok := open[s]
		if !ok || len(groups[gi]) == maxBatch {
			gi = len(groups)
			groups = append(groups, nil)
			open[s] = gi
		}
		groups[gi] = append(groups[gi], i)
	}
	return groups
}
