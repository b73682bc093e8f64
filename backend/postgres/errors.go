package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
	"github.com/hashlock/locker/internal/fault"
)

// transientStates are the SQLSTATEs of a database that will answer again soon: a connection
// failure (class 08), a serialization failure or deadlock (the transaction was rolled back:
// nothing took effect), a statement or lock timeout, a server shutting down, starting up or
// out of connections, a read-only server (a standby, during a failover).
var transientStates = map[string]bool{
	"40001": true, "40P01": true, "57014": true, "55P03": true, "57P01": true, "57P02": true,
	"57P03": true, "53300": true, "53400": true, "25006": true, "58000": true,
}

// Unavailable reports whether err means that the database could not be reached or could not
// answer for now, so that the same call may succeed later: a network error (refused, reset,
// broken, timeout, EOF), a connection that could not be made, or one of transientStates. A
// permission error, a missing function (no Migrate) or a bad argument is not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return transientStates[pe.Code] || strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	return fault.Network(err) || errors.As(err, &ce) || pgconn.Timeout(err) || errors.Is(err, locker.ErrUnavailable)
}

// fail wraps a driver error with the operation: with ctx's error when ctx ended (pgx cancels the
// statement then, which the server reports as 57014: that says nothing of the server), or else
// with locker.ErrUnavailable when the error passes (see Unavailable).
func (b *Backend) fail(ctx context.Context, op string, err error) error {
	ctxErr := fault.CtxEnded(ctx)
	switch {
	case ctxErr != nil && !errors.Is(err, ctxErr):
		return display.Errorf("postgres: %s: %w (%w)", op, ctxErr, err)
	case ctxErr != nil:
		return display.Errorf("postgres: %s: %w", op, err)
	case Unavailable(err) && !errors.Is(err, locker.ErrUnavailable):
		return display.Errorf("postgres: %s: %w: %w", op, locker.ErrUnavailable, err)
	}
	return display.Errorf("postgres: %s: %w", op, err)
}
