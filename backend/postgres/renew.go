package postgres

import (
	"context"
	"errors"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Renew implements [locker.Locker.Renew]: one statement for the whole batch, which resets the
// lease of every entry whose owner still holds its key (that owner's lease only) on the
// database's clock. An entry with a TTL <= 0 gets an error wrapping [locker.ErrInvalid] and is
// not sent; when the statement fails, every entry sent gets its error (the outcome is unknown).
func (b *Backend) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := make([]error, len(batch))
	fill := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if b.err != nil {
		return fill(b.err)
	}
	if err := ctx.Err(); err != nil {
		return fill(err)
	}
	keys, owners, ttls, at := make([][]byte, 0, len(batch)), make([][]byte, 0, len(batch)), make([]int64, 0, len(batch)), make([]int, 0, len(batch))
	for i, r := range batch {
		ttl, err := millis("renew", r.TTL)
		if err != nil {
			errs[i] = err
			continue
		}
		keys, owners, ttls, at = append(keys, []byte(r.Key)), append(owners, []byte(r.Owner)), append(ttls, ttl), append(at, i)
	}
	if len(at) == 0 {
		return errs
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	rows, err := b.pool.Query(ctx, b.sql.renew, keys, owners, ttls)
	renewed := make([]bool, len(at))
	if err == nil {
		var pos int32
		for rows.Next() {
			if err = rows.Scan(&pos); err != nil {
				break
			}
			if pos >= 1 && int(pos) <= len(at) {
				renewed[pos-1] = true
			}
		}
		rows.Close()
		err = errors.Join(err, rows.Err())
	}
	if err != nil {
		err = b.fail(ctx, "renew", err)
	}
	for j, i := range at {
		switch {
		case err != nil:
			errs[i] = err
		case !renewed[j]:
			errs[i] = display.Errorf("postgres: renew: %w", locker.ErrNotHeld)
		}
	}
	return errs
}
