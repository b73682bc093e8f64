package locker

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type probeKey struct{}

// unlockCtx behaves as context.WithTimeout of the lease's values: it keeps their values, ends at
// its deadline (whether Done was asked for before or after), or with Canceled when stopped, and
// context.Cause of it is its own end, never that of Lock's ctx.
func TestUnlockCtx(t *testing.T) {
	if cancelCtxKey == nil {
		t.Fatal("the key of package context's cancelCtx was not caught")
	}
	synctest.Test(t, func(t *testing.T) {
		lockCtx, cancel := context.WithCancelCause(context.WithValue(context.Background(), probeKey{}, "v"))
		cancel(errors.New("the request ended")) // Lock's ctx ends with a cause of its own
		newCtx := func() (*unlockCtx, *Lease) {
			l := &Lease{}
			l.values = leaseValues{parent: lockCtx, lease: l}
			u := &unlockCtx{}
			u.start(&l.values, time.Second)
			return u, l
		}

		u, l := newCtx()
		if u.Value(probeKey{}) != "v" || u.Value(ownershipKey{}) != l {
			t.Fatal("unlockCtx lost the values")
		}
		if d, ok := u.Deadline(); !ok || d != time.Now().Add(time.Second) {
			t.Fatalf("Deadline = %v, %v", d, ok)
		}
		done := u.Done()
		if u.Err() != nil || context.Cause(u) != nil {
			t.Fatalf("Err, Cause = %v, %v before the deadline", u.Err(), context.Cause(u))
		}
		start := time.Now()
		<-done
		if time.Since(start) != time.Second || !errors.Is(u.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(u), context.DeadlineExceeded) {
			t.Fatalf("ended after %v with %v, cause %v; want DeadlineExceeded after 1s", time.Since(start), u.Err(), context.Cause(u))
		}

		u, _ = newCtx() // Done asked for only after the deadline
		time.Sleep(time.Second)
		if !errors.Is(u.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v past the deadline, want DeadlineExceeded", u.Err())
		}
		select {
		case <-u.Done():
		default:
			t.Fatal("Done is not closed past the deadline")
		}

		u, _ = newCtx() // stopped before its deadline
		done = u.Done()
		u.stop()
		<-done
		if !errors.Is(u.Err(), context.Canceled) {
			t.Fatalf("Err = %v after stop, want Canceled", u.Err())
		}
		time.Sleep(2 * time.Second)
		if !errors.Is(u.Err(), context.Canceled) {
			t.Fatalf("Err = %v after stop and the deadline, want Canceled", u.Err())
		}

		u, _ = newCtx() // stopped without Done, and derived from
		child, cancelChild := context.WithCancel(u)
		defer cancelChild()
		u.stop()
		<-child.Done()
		if !errors.Is(child.Err(), context.Canceled) || u.Done() == nil {
			t.Fatalf("a child's Err = %v after stop, want Canceled", child.Err())
		}
	})
}
