package locker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// A lease's context is made at the first call of Context; asked for only after the lease ended,
// it is the context it would have been all along: ended with the first cause, its deadline
// (of a fixed lease) kept, and ErrLockLost when that deadline came before the end.
func TestLeaseContextAskedLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := locker.New(memory.New(), locker.WithTTL(time.Second))
		defer c.Close()
		ctx := context.Background()
		check := func(what string, l *locker.Lease, wantErr, wantCause error, fixed bool) {
			t.Helper()
			lctx := l.Context()
			if lctx != l.Context() {
				t.Errorf("%s: Context returned two contexts", what)
			}
			<-lctx.Done()
			if !errors.Is(lctx.Err(), wantErr) || !errors.Is(context.Cause(lctx), wantCause) {
				t.Errorf("%s: Err %v, cause %v; want %v, %v", what, lctx.Err(), context.Cause(lctx), wantErr, wantCause)
			}
			if _, ok := lctx.Deadline(); ok != fixed {
				t.Errorf("%s: has a deadline: %v, want %v", what, ok, fixed)
			}
		}

		l, err := c.Lock(ctx, "unlocked")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		check("unlocked", l, context.Canceled, context.Canceled, false)

		l, err = c.Lock(ctx, "fixed", locker.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		check("fixed, unlocked in time", l, context.Canceled, context.Canceled, true)

		l, err = c.Lock(ctx, "expired", locker.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // past the lease (the fake clock of the bubble)
		_ = l.Unlock()              // ErrNotHeld: it expired
		check("fixed, unlocked after its deadline", l, context.DeadlineExceeded, locker.ErrLockLost, true)

		l, err = c.Lock(ctx, "forced")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ForceUnlock(ctx, "forced"); err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock()
		check("forced away, then unlocked", l, context.Canceled, locker.ErrLockLost, false)

		l, err = c.Lock(ctx, "closed")
		if err != nil {
			t.Fatal(err)
		}
		early := l.Context() // made before its end: the same outcome
		_ = c.Close()
		check("closed", l, context.Canceled, locker.ErrClosed, false)
		if early != l.Context() {
			t.Error("Context made a second context")
		}
	})
}
