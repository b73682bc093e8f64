package postgres

import (
	"context"
	"math"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// HandOff implements [locker.HandOffer.HandOff] in one call of the schema's hand_off function:
// req.From's one exclusive hold, or its one permit held once, passes to req.To, as
// [locker.HandOffRequest] says.
func (b *Backend) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	if b.err != nil {
		return locker.HandOffResult{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return locker.HandOffResult{}, err
	}
	ttl, err := millis("hand off", req.TTL)
	if err != nil {
		return locker.HandOffResult{}, err
	}
	if req.Key == "" || req.From == "" || req.To == "" || req.From == req.To {
		return locker.HandOffResult{}, display.Errorf("postgres: hand off: an empty key or owner, or From equal to To: %w", locker.ErrInvalid)
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	var holds, queued int
	var token int64
	if err := b.pool.QueryRow(ctx, b.sql.handOff, []byte(req.Key), []byte(req.From), []byte(req.To), ttl, req.Fence).Scan(&holds, &token, &queued); err != nil {
		return locker.HandOffResult{}, b.fail(ctx, "hand off", err)
	}
	if holds < 0 {
		return locker.HandOffResult{}, display.Errorf("postgres: hand off: the owner holds it neither exclusively, once, nor as one permit, once: %w", locker.ErrNotHeld)
	}
	return locker.HandOffResult{Holds: holds, Token: uint64(token), Queued: queued}, nil
}

// RaiseFence implements [locker.FenceRaiser]: it sets key's fencing counter to token if lower.
// A token above math.MaxInt64 (a bigint) is refused with an error wrapping [locker.ErrInvalid].
func (b *Backend) RaiseFence(ctx context.Context, key string, token uint64) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return display.Errorf("postgres: raise fence: token %d above a bigint: %w", token, locker.ErrInvalid)
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	if _, err := b.pool.Exec(ctx, b.sql.raise, []byte(key), int64(token)); err != nil {
		return b.fail(ctx, "raise fence", err)
	}
	return nil
}
