// Package fault tells, once for the Client and every backend, why a call failed: its ctx ended,
// or the network between the caller and the server did.
package fault

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// CtxEnded returns ctx's error, or context.DeadlineExceeded once ctx's deadline has passed
// though its timer has not fired yet (a driver that checks the deadline itself, as Redigo does,
// may report it first); nil while ctx runs.
func CtxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Network reports whether err is a network failure: refused, reset, broken pipe, closed, EOF, or
// a net.Error (a timeout, say).
func Network(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne)
}
