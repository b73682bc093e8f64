package postgres

import (
	"context"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Release implements [locker.Locker.Release] in one call of the schema's release function, as
// locker.ReleaseRequest says: at zero the key's rows are deleted, the head of its queue may be
// granted the key, and a release notice is sent (NOTIFY, on commit).
func (b *Backend) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var flags int32
	if req.Fresh {
		flags |= flagFresh
	}
	if req.Undo {
		flags |= flagUndo
	}
	if req.Shared {
		flags |= flagShared
	}
	var reply int64
	if req.ReplyWindow > 0 {
		reply, _ = millis("release", req.ReplyWindow)
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	var left int
	if err := b.pool.QueryRow(ctx, b.sql.release, []byte(req.Key), []byte(req.Owner), orNil(req.ID), flags, reply).Scan(&left); err != nil {
		return 0, b.fail(ctx, "release", err)
	}
	if left < 0 {
		if req.Undo && req.ID != "" {
			return 0, display.Errorf("postgres: undo: %w", locker.ErrNotHeld)
		}
		return 0, display.Errorf("postgres: release: %w", locker.ErrNotHeld)
	}
	return left, nil
}

// Dequeue implements [locker.KindLocker.Dequeue]: it takes owner's entry out of key's wait
// queue, sending a notice when live entries were behind it, and gives back a grant that owner
// did not take (releasing that hold, which may grant the key to the next).
func (b *Backend) Dequeue(ctx context.Context, key, owner string) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	if _, err := b.pool.Exec(ctx, b.sql.dequeue, []byte(key), []byte(owner)); err != nil {
		return b.fail(ctx, "dequeue", err)
	}
	return nil
}
