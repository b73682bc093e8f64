package rediscore

import (
	"context"
	"errors"
	"strings"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
	"github.com/hashlock/locker/internal/fault"
)

// ErrNotReplicated means that fewer replicas than asked for (WithReplicaAck) acknowledged an
// acquire or a release within the timeout. An error wrapping it also wraps locker.ErrUnavailable:
// for an acquire, the lock was taken back and the Client's Lock tries again; for a release, the
// lock was released on the master, but a failover may bring it back until its lease runs out.
// Test for it with errors.Is.
var ErrNotReplicated = errors.New("locker: not acknowledged by enough replicas")

// fail wraps a driver error with the operation and key: a script's NOTALOCK, NOTHELD, UPGRADE or
// WRONGLIMIT answer with locker.ErrNotALock, locker.ErrNotHeld, locker.ErrUpgrade or
// locker.ErrLimitMismatch; otherwise with ctx's
// error when ctx ended (drivers do not all say so: Redigo reports the I/O timeout it derived from
// the deadline, which may fire a moment before the ctx's own timer), or else with
// locker.ErrUnavailable when the error is one that passes (see Unavailable).
func (b *Backend) fail(ctx context.Context, op string, err error) error {
	if why, sentinel := scriptRefusal(err); sentinel != nil {
		if why == "" {
			return display.Errorf("%s: %s: %w", b.prefix, op, sentinel)
		}
		return display.Errorf("%s: %s: %w (%s)", b.prefix, op, sentinel, why)
	}
	ctxErr := fault.CtxEnded(ctx)
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return display.Errorf("%s: %s: %w (%w)", b.prefix, op, ctxErr, err)
	}
	// The driver reports ctx's end: the server is unavailable only if something else says so (a
	// dial that failed meanwhile), not because ctx's deadline is a timeout.
	if down := ctxErr == nil && Unavailable(err) || ctxErr != nil && unavailableBesides(err, ctxErr); down && !errors.Is(err, locker.ErrUnavailable) {
		return display.Errorf("%s: %s: %w: %w", b.prefix, op, locker.ErrUnavailable, err)
	}
	return display.Errorf("%s: %s: %w", b.prefix, op, err)
}

// scriptRefusal returns the reason a script gives in an error answer (NOTALOCK, NOTHELD,
// UPGRADE, WRONGLIMIT: see the scripts), "" when it gives none, and the answer's sentinel; a nil sentinel
// for any other error.
func scriptRefusal(err error) (why string, sentinel error) {
	if err == nil {
		return "", nil
	}
	msg := err.Error()
	for code, sentinel := range scriptErrors {
		i := strings.Index(msg, code)
		if i < 0 || i > 0 && msg[i-1] != ' ' && msg[i-1] != '-' {
			continue
		}
		switch rest := msg[i+len(code):]; {
		case rest == "":
			return "", sentinel
		case rest[0] == ' ':
			return rest[1:], sentinel
		}
	}
	return "", nil
}

// scriptErrors are the error codes the scripts answer with, and their sentinels.
var scriptErrors = map[string]error{"NOTALOCK": locker.ErrNotALock, "NOTHELD": locker.ErrNotHeld, "UPGRADE": locker.ErrUpgrade,
	"WRONGLIMIT": locker.ErrLimitMismatch}

// unreplicated is the error of an acquire or a release that fewer than the configured replicas
// acknowledged.
func (b *Backend) unreplicated(op string, acks int, what string) error {
	return display.Errorf("%s: %s: %w: %w (%d of %d)%s", b.prefix, op, locker.ErrUnavailable, ErrNotReplicated, acks, b.opts.acks, what)
}
