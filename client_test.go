package locker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// A fixed re-entry with a shorter TTL shortens the backend's lease; the watchdog must renew the
// renewed outer hold before that shorter lease runs out, and the inner lease ends on its own.
func TestMixedLeasesOnOneHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		c := locker.New(b, locker.WithTTL(3*time.Second))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // fail, not hang
		defer cancel()
		outer, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer outer.Unlock()
		time.Sleep(time.Second)
		inner, err := c.Lock(outer.Context(), "k", locker.WithTTL(300*time.Millisecond), locker.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		if err := context.Cause(outer.Context()); err != nil {
			t.Fatalf("the renewed outer lease ended: %v", err)
		}
		if cause := context.Cause(inner.Context()); !errors.Is(cause, locker.ErrLockLost) {
			t.Fatalf("the fixed inner lease's cause = %v, want ErrLockLost at its TTL", cause)
		}
		if st, _ := b.Inspect(ctx, "k"); !st.Locked || st.Holds != 2 {
			t.Fatalf("state %+v, want both holds still on the backend", st)
		}
		if err := inner.Unlock(); err != nil {
			t.Fatalf("the inner hold is still on the backend, Unlock = %v", err)
		}
	})
}

// The lease context carries the values of the ctx given to Lock.
func TestLeaseContextKeepsValues(t *testing.T) {
	type key struct{}
	c := locker.New(memory.New())
	defer c.Close()
	l, err := c.Lock(context.WithValue(context.Background(), key{}, "trace-1"), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if l.Context().Value(key{}) != "trace-1" {
		t.Fatal("the lease context lost the caller's values")
	}
}

// Leases of two keys from nested contexts: each key re-enters only its own lock.
func TestOwnershipIsPerKey(t *testing.T) {
	c := locker.New(memory.New())
	defer c.Close()
	a, err := c.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock()
	b, err := c.Lock(a.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock()
	if b.Holds() != 1 {
		t.Fatalf("a lock on another key counted %d holds", b.Holds())
	}
	again, err := c.TryLock(b.Context(), "a")
	if err != nil {
		t.Fatalf("re-entry of a through a context derived from both leases: %v", err)
	}
	defer again.Unlock()
	if again.Holds() != 2 {
		t.Fatalf("re-entry of a: holds %d, want 2", again.Holds())
	}
}

// WithOwner shares ownership deliberately, across Clients.
func TestWithOwnerSharesTheLock(t *testing.T) {
	b := memory.New()
	c1, c2 := locker.New(b), locker.New(b)
	defer c1.Close()
	defer c2.Close()
	ctx := context.Background()
	l1, err := c1.Lock(ctx, "k", locker.WithOwner("batch-7"))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := c2.TryLock(ctx, "k", locker.WithOwner("batch-7"))
	if err != nil || l2.Holds() != 2 {
		t.Fatalf("the same explicit owner from another Client: %v, holds %d; want re-entry", err, l2.Holds())
	}
	if _, err := c2.TryLock(ctx, "k"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("a random owner got a lock held by batch-7: %v", err)
	}
	if err := errors.Join(l2.Unlock(), l1.Unlock()); err != nil {
		t.Fatal(err)
	}
}

// blockedRenew holds the watchdog's Renew until release is closed.
type blockedRenew struct {
	locker.Locker
	release chan struct{}
}

func (b *blockedRenew) Renew(ctx context.Context, batch []locker.Renewal) []error {
	<-b.release
	return b.Locker.Renew(ctx, batch)
}

// A re-entry while a renewal of the same hold is in flight: both reset the lease, and the lease
// survives. This runs in real time, with no synchronisation between the test and the blocked
// renewal on purpose: any happens-before edge (a channel, synctest.Wait) would hide from -race
// a watchdog that reads the hold outside the Client's lock. The sleep only makes the overlap
// likely; every interleaving must pass.
func TestReentryDuringRenewal(t *testing.T) {
	b := &blockedRenew{Locker: memory.New(), release: make(chan struct{})}
	c := locker.New(b, locker.WithTTL(60*time.Millisecond))
	defer c.Close()
	outer, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // the first renewal (due at 20ms) is in flight, blocked
	inner, err := c.Lock(outer.Context(), "k")
	close(b.release)
	if err != nil {
		t.Fatal(err)
	}
	if err := context.Cause(outer.Context()); err != nil {
		t.Fatalf("the lease ended: %v", err)
	}
	if err := errors.Join(inner.Unlock(), outer.Unlock()); err != nil {
		t.Fatal(err)
	}
}

// Error messages cut a key after 64 bytes: a 64 KiB key must not make a 64 KiB message.
func TestErrorsCutLongKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b := memory.New()
		a, other := locker.New(b), locker.New(b)
		defer a.Close()
		defer other.Close()
		key := strings.Repeat("k", locker.MaxKeyLen)
		held, err := a.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, refused := other.TryLock(ctx, key)
		_, waited := other.Lock(ctx, key, locker.WithRetry(locker.LimitRetry(locker.NoRetry(), 0)))
		_ = held.Unlock()
		again := held.Unlock()
		for _, err := range []error{refused, waited, again} {
			if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "more bytes") {
				t.Errorf("error %.100q… (%d bytes): want a message with the key cut", err, len(fmt.Sprint(err)))
			}
		}
	})
}

// WithOwnerLabel puts the label before 32 random hex digits; a label it refuses (as
// CheckOwnerLabel says) makes every call fail with ErrInvalid.
func TestOwnerLabel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := locker.New(memory.New(), locker.WithOwnerLabel("web-1/4242"))
	defer c.Close()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	label, random, ok := strings.Cut(l.Owner(), "#")
	if !ok || label != "web-1/4242" || len(random) != 32 || strings.Trim(random, "0123456789abcdef") != "" {
		t.Errorf("owner %q, want web-1/4242# and 32 hex digits", l.Owner())
	}
	if err := locker.CheckOwnerLabel("web-1/4242"); err != nil {
		t.Errorf("CheckOwnerLabel of a good label: %v", err)
	}
	for _, bad := range []string{"", strings.Repeat("a", locker.MaxLabelLen+1), "\xff", "a\nb"} {
		if err := locker.CheckOwnerLabel(bad); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("CheckOwnerLabel(%q) = %v, want ErrInvalid", bad, err)
		}
		c := locker.New(memory.New(), locker.WithOwnerLabel(bad))
		if _, err := c.TryLock(ctx, "k"); !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("TryLock with the label %q = %v, want ErrInvalid", bad, err)
		}
		c.Close()
	}
}
