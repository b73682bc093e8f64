package rediscore

import (
	"context"
	"errors"
	"strings"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
	"github.com/hashlock/locker/internal/fault"
)

// transientReplies are the Redis error replies of a server that will answer again soon: loading
// its data, a replica promoted or demoted (failover), a cluster reconfiguring, a script running.
var transientReplies = []string{"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ", "BUSY ", "NOREPLICAS "}

// Unavailable reports whether a driver error means that the server could not be reached or
// could not answer for now, so that the same call may succeed later: a network error (refused,
// reset, broken pipe, timeout, EOF), one of the transient error replies, or an error that wraps
// locker.ErrUnavailable (a driver that knows an error to pass says so). Errors such as NOPERM,
// WRONGTYPE or a script error are not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if fault.Network(err) || errors.Is(err, locker.ErrUnavailable) {
		return true
	}
	msg := err.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// unavailableBesides reports whether err, which wraps ctxErr, holds a cause that Unavailable
// counts other than ctxErr: context.DeadlineExceeded is a net.Error (a timeout), but a call cut
// short by its ctx says nothing of the server.
func unavailableBesides(err, ctxErr error) bool {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if unavailableBesides(inner, ctxErr) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return unavailableBesides(inner, ctxErr)
		}
	}
	return err != ctxErr && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && Unavailable(err)
}

// Moved returns err wrapped with locker.ErrUnavailable when it is a MOVED or ASK reply, which a
// driver's EvalWait may get on a cluster: it sends the script to the master of the key's slot
// itself, and when the slot has moved since, the client only updates its slot map, and the call
// may be sent again. Otherwise it returns err. (Elsewhere such replies are the driver's to
// follow, or mean a misconfiguration.)
func Moved(err error) error {
	if err != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
		return display.Errorf("%w: %w", locker.ErrUnavailable, err)
	}
	return err
}
