package postgres

import (
	"context"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Acquire implements [locker.Locker.Acquire] in one call of the schema's acquire function, as
// locker.AcquireRequest says, shared holds, the wait queue and grants included, and with
// req.Limit a semaphore's permit, as [locker.Semaphorer] says (a waiting one's entry may ask for
// the grant of a permit). A TTL <= 0, a negative Wait, or
// a Limit outside [0, MaxLimit] is refused with an error wrapping [locker.ErrInvalid], nothing
// sent.
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
	switch {
	case req.Limit < 0 || req.Limit > MaxLimit:
		return locker.Acquisition{}, display.Errorf("postgres: acquire: limit %d is not within [0, %d]: %w", req.Limit, MaxLimit, locker.ErrInvalid)
	case req.Limit > 0:
		req.Shared = true // a permit is a shared hold
	}
	if req.Grant > 0 {
		grant, _ = millis("acquire", req.Grant)
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	// One struct for the results: one allocation, however many columns.
	var out struct {
		holds, taken     int32
		ttlMicros, token int64
	}
	err = b.pool.QueryRow(ctx, b.sql.acquire, []byte(req.Key), []byte(req.Owner), ttl, orNil(req.ID), acquireFlags(req), wait, grant, int32(req.Limit)).
		Scan(&out.holds, &out.ttlMicros, &out.token, &out.taken)
	switch {
	case err != nil:
		return locker.Acquisition{}, b.fail(ctx, "acquire", err)
	case out.holds == -1:
		return locker.Acquisition{}, display.Errorf("postgres: acquire: re-entry: %w", locker.ErrNotHeld)
	case out.holds == -2:
		return locker.Acquisition{}, display.Errorf("postgres: acquire: %w", locker.ErrUpgrade)
	case out.holds == -3:
		return locker.Acquisition{}, mismatch(int(out.taken), req.Limit)
	}
	return locker.Acquisition{Holds: int(out.holds), TTL: time.Duration(out.ttlMicros) * time.Microsecond, Token: uint64(out.token), Taken: int(out.taken)}, nil
}

// MaxLimit is the largest semaphore a Backend accepts (locker.Semaphorer): each permit taken is a
// row, and a call on a semaphore's key reads every live row of the key (to forget those whose
// lease ended, and to count the permits taken), so the server's work per call grows with the
// permits taken; up to 65,536 a call stays within milliseconds.
const MaxLimit = 1 << 16

// MaxLimit implements [locker.Semaphorer]: it returns the package's MaxLimit (65,536).
func (b *Backend) MaxLimit() int { return MaxLimit }

// mismatch is the error of a request with limit want on a key held with limit have (0: a lock).
func mismatch(have, want int) error {
	switch {
	case have == 0:
		return display.Errorf("postgres: acquire: the key is held as a lock, not a semaphore of %d: %w", want, locker.ErrLimitMismatch)
	case want == 0:
		return display.Errorf("postgres: acquire: the key is held as a semaphore of %d, not a lock: %w", have, locker.ErrLimitMismatch)
	}
	return display.Errorf("postgres: acquire: the key is held as a semaphore of %d, not %d: %w", have, want, locker.ErrLimitMismatch)
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
