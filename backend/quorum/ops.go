package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// drift is the allowance for the nodes' clocks running at different rates during a lease, as
// the Client's: 1% of the TTL plus 2ms.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// Acquire implements locker.Locker: see the package documentation.
func (b *Backend) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if b.err != nil {
		return locker.Acquisition{}, b.err
	}
	switch {
	case req.Limit != 0:
		return locker.Acquisition{}, display.Errorf("quorum: acquire: semaphores: %w", errors.ErrUnsupported)
	case req.Shared || req.Fair:
		return locker.Acquisition{}, display.Errorf("quorum: acquire: shared holds and fair queues: %w", errors.ErrUnsupported)
	}
	req.Wait = 0 // no queue: nodes' queues would each order waiters differently
	start := time.Now()
	res := all(ctx, b, min(b.timeout, req.TTL), func(ctx context.Context, i int, n locker.Locker) (locker.Acquisition, error) {
		nreq := req
		nreq.Owner, nreq.ID = b.nodeOwner(i, req.Owner), b.nodeID(i, req.ID)
		return n.Acquire(ctx, nreq)
	})
	var (
		holds    []int
		refusals []time.Duration
		errs     []error
		invalid  error
		notHeld  error // a node's answer to a re-entry: the owner holds nothing there
	)
	for _, r := range res {
		switch {
		case errors.Is(r.err, locker.ErrInvalid), errors.Is(r.err, locker.ErrNotALock):
			invalid = r.err
		case errors.Is(r.err, locker.ErrNotHeld):
			notHeld = r.err
		case refused(r):
			refusals = append(refusals, r.v.TTL) // a semaphore's (ErrLimitMismatch): TTL unknown, 0
		case r.err != nil:
			errs = append(errs, r.err)
		default:
			holds = append(holds, r.v.Holds)
		}
	}
	if invalid != nil {
		b.takeBack(ctx, req, res)
		return locker.Acquisition{}, invalid
	}
	if mixed(res) {
		if err := b.checkNodeSet(ctx, req, res); err != nil {
			b.takeBack(ctx, req, res)
			return locker.Acquisition{}, err
		}
	}
	if len(holds) >= b.majority && time.Since(start) < req.TTL-drift(req.TTL) {
		a := locker.Acquisition{Holds: kth(holds, b.majority)}
		if req.Fence {
			token, err := b.fence(ctx, req, res, a.Holds)
			if err != nil {
				b.takeBack(ctx, req, res)
				return locker.Acquisition{}, err
			}
			a.Token = token
		}
		if time.Since(start) < req.TTL-drift(req.TTL) {
			return a, nil
		}
	}
	b.takeBack(ctx, req, res)
	if len(holds)+len(errs) >= b.majority && len(errs) > 0 {
		return locker.Acquisition{}, b.failure(ctx, "acquire", len(res)-len(errs), errs)
	}
	if len(holds) >= b.majority {
		return locker.Acquisition{}, display.Errorf("quorum: acquire: granted after %v, too late for a lease of %v: %w",
			time.Since(start), req.TTL, locker.ErrUnavailable)
	}
	// A re-entry is refused by a node only when the node remembers it (it was sent again): a
	// majority of such refusals outvotes the nodes that missed it and know nothing of the hold.
	if notHeld != nil && len(refusals) < b.majority {
		return locker.Acquisition{}, display.Errorf("quorum: acquire: re-entry granted by %d of %d nodes, %d needed: %w",
			len(holds), len(b.nodes), b.majority, notHeld)
	}
	// Refused by enough nodes: wait, at most, for the soonest end of a refusing holder's lease.
	var wait time.Duration
	for _, d := range refusals {
		if d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	return locker.Acquisition{TTL: wait}, nil
}

// fence returns the token of a granted acquire. For a new lock (the majority's count is 1) it is
// the largest token of the nodes that granted it (unless a majority share one: the same request
// sent again), and every node's counter is first raised to it;
// a majority of the granting nodes must succeed, so that any later majority (which shares a node
// with them) draws a larger token. For a re-entry it is the lock's token: the one the nodes that
// granted the lock were raised to, which a majority of the nodes holding the majority's count
// report; a node that granted only later (its lease had run out, or it missed the lock) reports
// another, and is outvoted.
func (b *Backend) fence(ctx context.Context, req locker.AcquireRequest, res []outcome[locker.Acquisition], holds int) (uint64, error) {
	var tokens []uint64
	for _, r := range res {
		if r.err == nil && r.v.Acquired() && r.v.Holds >= holds {
			tokens = append(tokens, r.v.Token)
		}
	}
	if holds > 1 {
		return commonest(tokens, b.majority), nil
	}
	token := slices.Max(tokens)
	if t, ok := sharedBy(tokens, b.majority); ok {
		// An acquire sent again (its reply was lost): a majority report the token its first send
		// returned, the one they were raised to; a node that granted the first send without
		// answering it may report a larger one of its own.
		token = t
	}
	granted := func(i int) bool { return res[i].err == nil && res[i].v.Acquired() }
	if err := b.raise(ctx, req.Key, token, granted); err != nil {
		return 0, err
	}
	return token, nil
}

// commonest returns the value that at least k of vs share, or, when none does, the k-th largest.
func commonest(vs []uint64, k int) uint64 {
	if v, ok := sharedBy(vs, k); ok {
		return v
	}
	return kth(vs, k)
}

// sharedBy returns the value that at least k of vs share, if one does.
func sharedBy(vs []uint64, k int) (uint64, bool) {
	count := make(map[uint64]int, len(vs))
	for _, v := range vs {
		if count[v]++; count[v] >= k {
			return v, true
		}
	}
	return 0, false
}

// takeBack undoes a failed acquire on every node that granted it or may have: with a request
// ID, a take-back (which also refuses the acquire if it is still on its way); without one, a
// plain release of the nodes that granted it.
func (b *Backend) takeBack(ctx context.Context, req locker.AcquireRequest, res []outcome[locker.Acquisition]) {
	ctx = context.WithoutCancel(ctx)
	undo := locker.ReleaseRequest{Key: req.Key, Undo: req.ID != "", Fresh: req.Fresh}
	all(ctx, b, b.timeout, func(ctx context.Context, i int, n locker.Locker) (struct{}, error) {
		granted := res[i].err == nil && res[i].v.Acquired()
		if granted || (undo.Undo && mayHaveActed(res[i].err)) {
			nundo := undo
			nundo.Owner, nundo.ID = b.nodeOwner(i, req.Owner), b.nodeID(i, req.ID)
			_, err := n.Release(ctx, nundo)
			return struct{}{}, err
		}
		return struct{}{}, nil
	})
}

// Release implements locker.Locker: it releases on every node and reports the majority's
// remaining count; ErrNotHeld when a majority does not hold the lock.
func (b *Backend) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if req.Shared {
		return 0, display.Errorf("quorum: release: shared holds: %w", errors.ErrUnsupported)
	}
	res := all(ctx, b, b.timeout, func(ctx context.Context, i int, n locker.Locker) (int, error) {
		nreq := req
		nreq.Owner, nreq.ID = b.nodeOwner(i, req.Owner), b.nodeID(i, req.ID)
		return n.Release(ctx, nreq)
	})
	var (
		left        []int
		notHeld     int
		errs        []error
		lastNotHeld error
	)
	for _, r := range res {
		switch {
		case r.err == nil:
			left = append(left, r.v)
		case errors.Is(r.err, locker.ErrNotHeld), errors.Is(r.err, locker.ErrNotALock):
			notHeld++
			lastNotHeld = r.err
		default:
			errs = append(errs, r.err)
		}
	}
	switch {
	case len(left) >= b.majority:
		return kth(left, b.majority), nil
	case notHeld >= b.majority || (len(errs) == 0 && notHeld > 0):
		return 0, display.Errorf("quorum: release: %d of %d nodes do not hold it: %w", notHeld, len(b.nodes), lastNotHeld)
	default:
		return 0, b.failure(ctx, "release", len(res)-len(errs), errs)
	}
}

// renewBatch is how many renewals in one Renew call get one more node timeout.
const renewBatch = 512

// Renew implements locker.Locker: an entry is renewed when a majority renewed it, not held when
// a majority does not hold it, and unknown otherwise. Each node's call is bounded by one node
// timeout per 512 entries.
func (b *Backend) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := make([]error, len(batch))
	if b.err != nil {
		for i := range errs {
			errs[i] = b.err
		}
		return errs
	}
	// A node timeout per renewBatch entries (and ctx, which the Client ends when the batch's
	// last lease may have expired): a node renews 100,000 leases in one call, which takes longer
	// than one lock operation.
	bound := b.timeout * time.Duration(1+len(batch)/renewBatch)
	res := all(ctx, b, bound, func(ctx context.Context, i int, n locker.Locker) ([]error, error) {
		nbatch := make([]locker.Renewal, len(batch))
		for j, r := range batch {
			nbatch[j] = locker.Renewal{Key: r.Key, Owner: b.nodeOwner(i, r.Owner), TTL: r.TTL}
		}
		return n.Renew(ctx, nbatch), nil
	})
	for i := range batch {
		renewed, notHeld := 0, 0
		var failed []error
		for _, node := range res {
			var err error
			if i < len(node.v) {
				err = node.v[i]
			} else {
				err = fmt.Errorf("quorum: a node returned %d results for %d entries", len(node.v), len(batch))
			}
			switch {
			case err == nil:
				renewed++
			case errors.Is(err, locker.ErrNotHeld):
				notHeld++
			default:
				failed = append(failed, err)
			}
		}
		switch {
		case renewed >= b.majority:
		case notHeld >= b.majority || renewed+len(failed) < b.majority:
			errs[i] = display.Errorf("quorum: renew: %d of %d nodes do not hold it: %w", notHeld, len(b.nodes), locker.ErrNotHeld)
		default:
			errs[i] = b.failure(ctx, "renew", renewed+notHeld, failed)
		}
	}
	return errs
}

// Inspect implements locker.Locker: the lock is held when a majority reports it held; then the
// hold count and remaining lease are the largest that a majority reports, and the owner the
// caller's token, without the quorum's mark (see the package documentation). Holders is that
// one owner with that count and lease: a quorum holds only exclusive locks. A node on which the
// key is held shared or as a semaphore (someone else's use: the quorum takes neither) counts as
// holding it, with the Owner, Holds and TTL it reports, as for a lock; the State never has
// Shared, Readers or Limit.
func (b *Backend) Inspect(ctx context.Context, key string) (locker.State, error) {
	if b.err != nil {
		return locker.State{}, b.err
	}
	res := all(ctx, b, b.timeout, func(ctx context.Context, _ int, n locker.Locker) (locker.State, error) {
		return n.Inspect(ctx, key)
	})
	if err := firstNotALock(res); err != nil {
		return locker.State{}, err
	}
	var (
		holds    []int
		ttls     []time.Duration
		owners   = make(map[string]int)
		errs     []error
		answered int
	)
	for _, r := range res {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.v.Locked:
			answered++
			holds = append(holds, r.v.Holds)
			ttls = append(ttls, r.v.TTL)
			owners[stripMark(r.v.Owner)]++
		default:
			answered++
		}
	}
	if answered < b.majority {
		return locker.State{}, b.failure(ctx, "inspect", answered, errs)
	}
	if len(holds) < b.majority {
		return locker.State{}, nil
	}
	st := locker.State{Locked: true, Holds: kth(holds, b.majority), TTL: kth(ttls, b.majority)}
	for owner, n := range owners {
		if n > owners[st.Owner] || (n == owners[st.Owner] && owner < st.Owner) {
			st.Owner = owner // the owner most nodes report (ties: the least, to be repeatable)
		}
	}
	st.Holders = []locker.Holder{{Owner: st.Owner, Holds: st.Holds, TTL: st.TTL}}
	return st, nil
}

// ForceRelease implements locker.Locker: it deletes the lock on every node, and reports whether
// a majority had one.
func (b *Backend) ForceRelease(ctx context.Context, key string) (bool, error) {
	if b.err != nil {
		return false, b.err
	}
	res := all(ctx, b, b.timeout, func(ctx context.Context, _ int, n locker.Locker) (bool, error) {
		return n.ForceRelease(ctx, key)
	})
	if err := firstNotALock(res); err != nil {
		return false, err
	}
	removed, answered := 0, 0
	var errs []error
	for _, r := range res {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.v:
			removed++
			answered++
		default:
			answered++
		}
	}
	if answered < b.majority {
		return false, b.failure(ctx, "force release", answered, errs)
	}
	return removed >= b.majority, nil
}

// RaiseFence implements locker.FenceRaiser on every node; a majority must succeed.
func (b *Backend) RaiseFence(ctx context.Context, key string, token uint64) error {
	if b.err != nil {
		return b.err
	}
	return b.raise(ctx, key, token, func(int) bool { return true })
}

// raise raises key's fencing counter to token on every node; a majority of the nodes that
// counts selects (by index) must succeed.
func (b *Backend) raise(ctx context.Context, key string, token uint64, counts func(i int) bool) error {
	res := all(ctx, b, b.timeout, func(ctx context.Context, _ int, n locker.Locker) (struct{}, error) {
		fr, ok := n.(locker.FenceRaiser)
		if !ok {
			return struct{}{}, display.Errorf("quorum: node %T cannot raise fencing counters: %w", n, locker.ErrInvalid)
		}
		return struct{}{}, fr.RaiseFence(ctx, key, token)
	})
	var errs []error
	ok := 0
	for i, r := range res {
		switch {
		case !counts(i):
		case r.err != nil:
			errs = append(errs, r.err)
		default:
			ok++
		}
	}
	if ok < b.majority {
		return b.failure(ctx, "raise fence", ok, errs)
	}
	return nil
}
