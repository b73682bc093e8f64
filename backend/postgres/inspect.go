package postgres

import (
	"context"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Inspect implements [locker.Locker.Inspect]: one read of one snapshot, taking no lock. Holders
// lists every live holder sorted by owner token (bytewise, as Go compares strings), each with its
// holds and its own remaining lease. For a key in shared mode, Owner is the reader whose token
// sorts first, Holds the readers' holds together, TTL the longest of their leases; a semaphore
// is reported so too, with its Limit, Shared false and Readers 0. It changes nothing.
func (b *Backend) Inspect(ctx context.Context, key string) (locker.State, error) {
	if b.err != nil {
		return locker.State{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return locker.State{}, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	var owners [][]byte
	var holds []int32
	var ttls []int64
	var excl bool
	var limit, queued int32
	if err := b.pool.QueryRow(ctx, b.sql.inspect, []byte(key)).Scan(&owners, &holds, &ttls, &excl, &limit, &queued); err != nil {
		return locker.State{}, b.fail(ctx, "inspect", err)
	}
	st := locker.State{Queued: int(queued)}
	if len(owners) == 0 {
		return st, nil
	}
	if len(holds) != len(owners) || len(ttls) != len(owners) {
		return locker.State{}, display.Errorf("postgres: inspect: %d owners, %d hold counts and %d leases", len(owners), len(holds), len(ttls))
	}
	st.Locked, st.Owner, st.Limit = true, string(owners[0]), int(limit)
	st.Holders = make([]locker.Holder, len(owners))
	for i, o := range owners {
		ttl := time.Duration(ttls[i]) * time.Microsecond
		if ttl <= 0 {
			ttl = time.Microsecond // held at the snapshot: some lease was left
		}
		st.Holders[i] = locker.Holder{Owner: string(o), Holds: int(holds[i]), TTL: ttl}
		st.Holds += int(holds[i])
		st.TTL = max(st.TTL, ttl)
	}
	if !excl && limit == 0 {
		st.Shared, st.Readers = true, len(owners)
	}
	return st, nil
}

// ForceRelease implements [locker.Locker.ForceRelease]: it deletes key's holds, whoever's, and
// sends a release notice when there was a live one. It touches only this Backend's tables.
func (b *Backend) ForceRelease(ctx context.Context, key string) (bool, error) {
	if b.err != nil {
		return false, b.err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	var found bool
	if err := b.pool.QueryRow(ctx, b.sql.force, []byte(key)).Scan(&found); err != nil {
		return false, b.fail(ctx, "force release", err)
	}
	return found, nil
}
