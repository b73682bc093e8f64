// Package quorum is a locker.Locker over several independent backends — typically three or five
// Redis masters, each through any of this module's Redis backends — in the manner of Redlock:
// a lock is held when a majority of the nodes hold it, so the lock survives the loss of a
// minority of the nodes, and no single server is a point of failure.
//
//	b := quorum.New(goredis.New(rdb1), rueidislocker.New(rc2), redigo.New(pool3))
//	client := locker.New(b)
//
// Every operation goes to all nodes in parallel, each call bounded by the node timeout
// (Config.NodeTimeout), and follows the majority:
//
//   - Acquire succeeds when a majority granted it and the time spent is well within the lease
//     (TTL − elapsed − drift > 0). Otherwise it takes back whatever it may have acquired (with
//     the request's ID, so that an acquire still on its way is refused) and reports a refusal,
//     or an error wrapping locker.ErrUnavailable when the failed nodes could have made the
//     difference. The hold count it reports is the majority's: the largest count that a
//     majority of the nodes hold (a node that missed a re-entry holds fewer, and cannot let
//     another owner in, since that owner would need a majority).
//   - A re-entry (AcquireRequest.Reentry) succeeds when a majority holds the owner's hold and
//     grants it; otherwise it is taken back and fails with locker.ErrNotHeld when nodes said
//     the owner holds nothing, unless the failed nodes could have made the difference.
//   - Release, Renew, Inspect and ForceRelease succeed when a majority answered, and report
//     what the majority reports. An entry of Renew is not held when a majority says so.
//   - A key that is not a lock on any node (locker.ErrNotALock) fails Acquire (after the take-
//     back), Inspect and ForceRelease with that node's error; the key is left as it is there.
//   - Release notices of any node wake waiters; the Client's timers still apply.
//   - Fencing tokens: the token of a new lock is the largest token of the nodes that granted
//     it, and before Acquire returns, every such node's counter is raised to it (one more
//     round trip, only for a new lock with Fence). Any later majority shares a node with this
//     one, so later tokens are larger. A re-entry reports the token that a majority of its
//     holding nodes agree on. Nodes must implement locker.FenceRaiser (all backends of this
//     module do).
//   - The node set: every client of a key must use the same nodes, or two clients could each
//     hold it on a majority of their own. So each node receives the caller's owner token
//     behind a mark, "quorum:<node count>:<node tag>:<fingerprint>#", where the fingerprint
//     covers the node count and the sorted Config.Names, and the tag is the node's rank by
//     name (without Names: its position); Inspect strips the mark. When an acquire is granted
//     by some nodes and refused by others, the refusing nodes are inspected (only then: the
//     uncontended path has no extra round trip), and a holder marked by another configuration,
//     or unmarked (a client of that server alone), or this owner's own hold taken through
//     another node (one server under two names), fails the acquire with ErrNodeSet after the
//     take-back. A mismatch is seen only where the two quorums' locks meet on a node.
//   - No shared holds or fair queues: a Backend is no locker.KindLocker (each node's queue would
//     order the waiters its own way), so Client.RLock and WithFair return an error wrapping
//     errors.ErrUnsupported; so do Acquire with Shared or Fair and Release with Shared. Wait
//     is ignored. A node on which the key is held shared or as a semaphore (someone else's use)
//     refuses the lock; when other nodes grant it, ErrNodeSet, as for any holder of one server.
//   - No semaphores: a Backend is no locker.Semaphorer, so Client.Acquire and TryAcquire return
//     an error wrapping errors.ErrUnsupported without a call to the nodes (Acquire with Limit too).
//
// Request IDs are passed on with the node's tag appended (each node remembers them), so retries
// are as safe as on one node. The nodes' clocks need not agree; the drift allowance (1% of the
// TTL + 2ms, as the Client's) covers their rate differences. Use 3 or 5 independent nodes; 1 or
// 2 nodes give no fault tolerance. What a quorum needs: "The quorum" in docs/safety.md.
package quorum

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var (
	_ locker.Locker      = (*Backend)(nil)
	_ locker.FenceRaiser = (*Backend)(nil)
)

// DefaultNodeTimeout bounds each call to a node when Config.NodeTimeout is zero.
const DefaultNodeTimeout = 500 * time.Millisecond

// Config configures a Backend.
type Config struct {
	// Nodes are the independent backends, at least one; use 3 or 5. Required. Every client of
	// a key must use the same nodes: see Names, and "The quorum" in docs/safety.md.
	Nodes []locker.Locker
	// Names, when set, names each node (Names[i] is Nodes[i]) the same way in every client of
	// the quorum, such as its server's "host:port" spelled one way everywhere; no credentials,
	// since names appear in errors. The locks then record a fingerprint of the sorted names, so
	// a client whose nodes have other names is refused (ErrNodeSet), and clients may list the
	// nodes in any order. Default nil: the locks record the node count and each node's
	// position, and every client must list the same nodes in the same order. All clients of a
	// key must agree on whether they use Names. One name per node, each non-empty and unique.
	Names []string
	// NodeTimeout bounds each call to one node (and, for Acquire, is at most the TTL; a batch of
	// renewals gets one NodeTimeout per 512 leases): a node that does not answer within it
	// counts as failed. Keep it well under the TTL. Default DefaultNodeTimeout (500ms).
	NodeTimeout time.Duration
}

// Backend is a locker.Locker over a majority of nodes. Create it with New or NewConfig; it is
// safe for concurrent use and needs no Close (the nodes stay their creator's).
type Backend struct {
	nodes    []locker.Locker
	names    []string // Config.Names, or nil
	fp       string   // the configuration's fingerprint
	tags     []int    // each node's tag: its name's rank, or its position
	marks    []string // the prefix of each node's owner tokens
	majority int
	timeout  time.Duration
	err      error // an invalid configuration, returned by every call
}

// New returns a Backend over nodes with the default configuration.
func New(nodes ...locker.Locker) *Backend { return NewConfig(Config{Nodes: nodes}) }

// NewConfig returns a Backend configured by cfg. It never fails: an invalid configuration (no
// nodes, a nil node, the same node twice, a negative timeout, Names of another length than
// Nodes, an empty or repeated name) makes every call return an error wrapping
// locker.ErrInvalid. One server given twice under two names is found only by its locks: the
// first Acquire fails with ErrNodeSet.
func NewConfig(cfg Config) *Backend {
	b := &Backend{nodes: slices.Clone(cfg.Nodes), majority: len(cfg.Nodes)/2 + 1, timeout: cfg.NodeTimeout}
	if b.timeout == 0 {
		b.timeout = DefaultNodeTimeout
	}
	if len(cfg.Names) > 0 {
		b.names = slices.Clone(cfg.Names)
	}
	b.fp, b.tags = fingerprint(len(b.nodes), b.names), tags(len(b.nodes), b.names)
	b.marks = marks(b.fp, b.tags)
	switch {
	case len(b.nodes) == 0:
		b.err = display.Errorf("quorum: no nodes: %w", locker.ErrInvalid)
	case slices.Contains(b.nodes, nil):
		b.err = display.Errorf("quorum: a nil node: %w", locker.ErrInvalid)
	case repeats(b.nodes):
		b.err = display.Errorf("quorum: the same node twice: the nodes must be independent: %w", locker.ErrInvalid)
	case b.timeout < 0:
		b.err = display.Errorf("quorum: node timeout %v: %w", cfg.NodeTimeout, locker.ErrInvalid)
	case b.names != nil && len(b.names) != len(b.nodes):
		b.err = display.Errorf("quorum: %d names for %d nodes: %w", len(b.names), len(b.nodes), locker.ErrInvalid)
	case slices.Contains(b.names, ""):
		b.err = display.Errorf("quorum: an empty node name: %w", locker.ErrInvalid)
	case len(slices.Compact(slices.Sorted(slices.Values(b.names)))) != len(b.names):
		b.err = display.Errorf("quorum: the same node name twice: the nodes must be independent: %w", locker.ErrInvalid)
	}
	return b
}

// Majority returns how many nodes make a majority.
func (b *Backend) Majority() int { return b.majority }

// repeats reports whether one node is given twice (nodes of a comparable type only).
func repeats(nodes []locker.Locker) bool {
	for i, n := range nodes {
		if !reflect.TypeOf(n).Comparable() {
			continue
		}
		for _, m := range nodes[:i] {
			if reflect.TypeOf(m) == reflect.TypeOf(n) && m == n {
				return true
			}
		}
	}
	return false
}

// outcome is one node's answer.
type outcome[T any] struct {
	v   T
	err error
}

// all calls f on every node (with its index) in parallel, each with ctx bounded by bound, and
// returns the outcomes in node order.
func all[T any](ctx context.Context, b *Backend, bound time.Duration, f func(ctx context.Context, i int, n locker.Locker) (T, error)) []outcome[T] {
	out := make([]outcome[T], len(b.nodes))
	var wg sync.WaitGroup
	for i, n := range b.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			out[i].v, out[i].err = f(nctx, i, n)
		})
	}
	wg.Wait()
	return out
}

// kth returns the k-th largest of vs (k from 1), or 0 when vs has fewer than k values: the
// largest value that at least k of them reach.
func kth[T int | uint64 | time.Duration](vs []T, k int) T {
	if len(vs) < k || k < 1 {
		var zero T
		return zero
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)-k]
}

// mayHaveActed reports whether a call that returned err may nevertheless have taken effect: an
// error other than those that say that nothing changed (see locker.Locker).
func mayHaveActed(err error) bool {
	return err != nil && !errors.Is(err, locker.ErrInvalid) && !errors.Is(err, locker.ErrNotHeld) &&
		!errors.Is(err, locker.ErrNotALock) && !errors.Is(err, locker.ErrUpgrade) && !errors.Is(err, locker.ErrLimitMismatch)
}

// firstNotALock returns the first error of outs that wraps locker.ErrNotALock, or nil.
func firstNotALock[T any](outs []outcome[T]) error {
	for _, o := range outs {
		if errors.Is(o.err, locker.ErrNotALock) {
			return o.err
		}
	}
	return nil
}

// failure describes the nodes' errors for an operation that no majority answered.
func (b *Backend) failure(ctx context.Context, op string, answered int, errs []error) error {
	err := display.Errorf("quorum: %s: %d of %d nodes answered, %d needed: %w", op, answered, len(b.nodes), b.majority, errors.Join(errs...))
	if ctxErr := ctx.Err(); ctxErr != nil {
		return display.Errorf("%w (%w)", ctxErr, err)
	}
	if !errors.Is(err, locker.ErrUnavailable) {
		// Nodes that time out or fail count as unavailable: others may answer next time.
		return display.Errorf("%w: %w", locker.ErrUnavailable, err)
	}
	return err
}
