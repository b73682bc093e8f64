package fault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// lateCtx has a deadline whose timer has not fired: its Err is still nil.
type lateCtx struct {
	context.Context
	deadline time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func TestCtxEnded(t *testing.T) {
	if err := CtxEnded(context.Background()); err != nil {
		t.Fatalf("a running ctx: %v", err)
	}
	if err := CtxEnded(lateCtx{context.Background(), time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("a ctx before its deadline: %v", err)
	}
	if err := CtxEnded(lateCtx{context.Background(), time.Now().Add(-time.Millisecond)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a ctx past its deadline, its timer not fired: %v, want DeadlineExceeded", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := CtxEnded(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled ctx: %v", err)
	}
}

func TestNetwork(t *testing.T) {
	for _, err := range []error{syscall.ECONNREFUSED, fmt.Errorf("dial: %w", syscall.ECONNRESET), net.ErrClosed, &net.OpError{Op: "read", Err: syscall.EPIPE}} {
		if !Network(err) {
			t.Errorf("Network(%v) = false", err)
		}
	}
	if Network(errors.New("NOPERM")) || Network(nil) {
		t.Error("Network of a server's refusal or nil = true")
	}
}
