package postgres

import (
	"context"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Acquire implements [locker.Locker.Acquire] in one call of the schema's acquire function, as
// locker.AcquireRequest says, shared holds, the wait queue and grants included. A TTL <= 0 or a
// negative Wait is refused with an error wrapping [locker.ErrInvalid], nothing sent.
func (b *Backend) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if b.err != nil {
		return locker.Acquisition{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return locker.Acquisition{}, err
	}
	ttl, err := millis("acquire", req.TTL)
	if err != nil {
		return locker.Acquisition{}, err
	}
	var wait, grant int64
	switch {
	case req.Wait < 0:
		return locker.Acquisition{}, display.Errorf("postgres: acquire: wait %v: %w", req.Wait, locker.ErrInvalid)
	case req.Wait > 0:
		wait, _ = millis("acquire", req.Wait)
	}
	if req.Grant > 0 {
		grant, _ = millis("acquire", req.Grant)
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	var holds int
	var ttlMicros, token int64
	err = b.pool.QueryRow(ctx, b.sql.acquire, []byte(req.Key), []byte(req.Owner), ttl, orNil(req.ID), acquireFlags(req), wait, grant).
		Scan(&holds, &ttlMicros, &token)
	switch {
	case err != nil:
		return locker.Acquisition{}, b.fail(ctx, "acquire", err)
	case holds == -1:
		return locker.Acquisition{}, display.Errorf("postgres: acquire: re-entry: %w", locker.ErrNotHeld)
	case holds == -2:
		return locker.Acquisition{}, display.Errorf("postgres: acquire: %w", locker.ErrUpgrade)
	}
	return locker.Acquisition{Holds: holds, TTL: time.Duration(ttlMicros) * time.Microsecond, Token: uint64(token)}, nil
}

// The flags of the acquire and release functions.
const (
	flagFresh   = 1
	flagReentry = 2 // acquire
	flagUndo    = 2 // release
	flagFence   = 4
	flagShared  = 8
	flagFair    = 16
)

func acquireFlags(req locker.AcquireRequest) int32 {
	var f int32
	for _, set := range []struct {
		on   bool
		flag int32
	}{{req.Fresh, flagFresh}, {req.Reentry, flagReentry}, {req.Fence, flagFence}, {req.Shared, flagShared}, {req.Fair, flagFair}} {
		if set.on {
			f |= set.flag
		}
	}
	return f
}
