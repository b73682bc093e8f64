package quorum

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// mixed reports whether an acquire was granted by some nodes and refused by others: the only
// outcome in which a holder taken with another node set can show (a quorum's own holder is on a
// majority, so a lock that is free or held within one configuration is granted or refused by
// most nodes alike, barring races and lost data).
func mixed(res []outcome[locker.Acquisition]) bool {
	granted, refusal := false, false
	for _, r := range res {
		granted = granted || (r.err == nil && r.v.Acquired())
		refusal = refusal || refused(r)
	}
	return granted && refusal
}

// refused reports whether a node refused an acquire because the key is held there: by another
// owner (Holds 0), or as a semaphore (ErrLimitMismatch: someone else's use, as a reader's hold
// is, since the quorum takes neither).
func refused(r outcome[locker.Acquisition]) bool {
	return (r.err == nil && !r.v.Acquired()) || errors.Is(r.err, locker.ErrLimitMismatch)
}

// checkNodeSet looks, after a mixed acquire, at who holds the key on the nodes that refused it
// (one Inspect each, in parallel) and returns an error wrapping ErrNodeSet when a holder's token
// was made by another configuration, or by this Backend through another node (one server named
// twice); nil otherwise, also when the Inspects fail (nothing seen, nothing refused).
func (b *Backend) checkNodeSet(ctx context.Context, req locker.AcquireRequest, res []outcome[locker.Acquisition]) error {
	states := all(ctx, b, b.timeout, func(ctx context.Context, i int, n locker.Locker) (locker.State, error) {
		if !refused(res[i]) {
			return locker.State{}, nil
		}
		return n.Inspect(ctx, req.Key)
	})
	var whys []string
	for i, st := range states {
		if !refused(res[i]) || st.err != nil || !st.v.Locked {
			continue
		}
		if why := b.mismatch(i, req.Owner, st.v.Owner); why != "" {
			whys = append(whys, why+heldAs(st.v))
		}
	}
	if len(whys) == 0 {
		return nil
	}
	return display.Errorf("quorum: acquire: %w: %s", ErrNodeSet, strings.Join(whys, "; "))
}

// heldAs says how a node holds a key other than as a lock, for mismatch's message: " (as a
// semaphore of 3)", " (shared, by readers)", or "" for a lock.
func heldAs(st locker.State) string {
	switch {
	case st.Limit > 0:
		return fmt.Sprintf(" (as a semaphore of %d)", st.Limit)
	case st.Shared:
		return " (shared, by readers)"
	}
	return ""
}

// mismatch says how the holder token found on node i differs from what this Backend would have
// sent it, or "" when it does not.
func (b *Backend) mismatch(i int, owner, token string) string {
	holder, m, ok := parseMark(token)
	switch {
	case !ok:
		return fmt.Sprintf("%s is held by %s, a client of that server alone, not of a quorum", b.nodeName(i), display.Owner(token))
	case m.count != len(b.nodes):
		return fmt.Sprintf("%s is held by %s through a quorum of %d nodes; this one has %d", b.nodeName(i), display.Owner(holder), m.count, len(b.nodes))
	case m.fp != b.fp:
		return fmt.Sprintf("%s is held by %s through a quorum of %d nodes with other names (fingerprint %s, here %s)", b.nodeName(i), display.Owner(holder), m.count, m.fp, b.fp)
	case m.tag == b.tags[i]:
		return ""
	case holder == owner:
		for j, t := range b.tags {
			if t == m.tag {
				return fmt.Sprintf("%s and %s are one server: it holds the hold taken through %s; give each server once", b.nodeName(i), b.nodeName(j), b.nodeName(j))
			}
		}
	}
	how := "at another position (list the nodes in the same order everywhere, or name them: Config.Names)"
	if len(b.names) > 0 {
		how = "under another name"
	}
	return fmt.Sprintf("%s is held by %s through a quorum that has this server %s, as its node tagged %d (here %d)", b.nodeName(i), display.Owner(holder), how, m.tag, b.tags[i])
}
