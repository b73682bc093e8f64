package postgres

import (
	"context"
	"time"

	"github.com/hashlock/locker"
)

// Inspect implements [locker.Locker.Inspect]: one read of one snapshot, taking no lock. For a key
// in shared mode, Owner is the reader whose token sorts first (bytewise), Holds the readers'
// holds together, TTL the longest of their leases. It changes nothing.
func (b *Backend) Inspect(ctx context.Context, key string) (locker.State, error) {
	if b.err != nil {
		return locker.State{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return locker.State{}, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	var owner []byte
	var holds, readers, queued int
	var ttl int64
	var shared bool
	if err := b.pool.QueryRow(ctx, b.sql.inspect, []byte(key)).Scan(&owner, &holds, &ttl, &shared, &readers, &queued); err != nil {
		return locker.State{}, b.fail(ctx, "inspect", err)
	}
	st := locker.State{Queued: queued}
	if owner != nil {
		st.Locked, st.Owner, st.Holds, st.TTL, st.Shared, st.Readers = true, string(owner), holds, time.Duration(ttl)*time.Microsecond, shared, readers
		if st.TTL <= 0 {
			st.TTL = time.Microsecond // held at the snapshot: some lease was left
		}
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
