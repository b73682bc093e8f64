package rediscore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
)

// A plain Lock+Unlock leaves no key on the server (the fresh owner's acquire and its last release
// write no marker), while a release that leaves holds does; a fresh owner's last release sent
// again finds nothing and removes nothing, and one that left a hold reports the first outcome.
func TestPlainLockUnlockLeavesNoKey(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		ctx := t.Context()
		c := locker.New(e.b)
		defer c.Close()
		for range 20 {
			l, err := c.Lock(ctx, "plain")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		if n := e.rdb.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("20 Lock+Unlock left %d keys (%v), want none", n, e.rdb.Keys(ctx, "*").Val())
		}

		// Straight to the backend: an owner with two holds, released with Fresh.
		acq := locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Minute, ID: "a1", Fresh: true}
		if _, err := e.b.Acquire(ctx, acq); err != nil {
			t.Fatal(err)
		}
		acq.ID, acq.Fresh, acq.Reentry = "a2", false, true
		if _, err := e.b.Acquire(ctx, acq); err != nil {
			t.Fatal(err)
		}
		inner := locker.ReleaseRequest{Key: "k", Owner: "o", ID: "r1", Fresh: true}
		for i := range 2 {
			if n, err := e.b.Release(ctx, inner); err != nil || n != 1 {
				t.Fatalf("inner release (send %d) = %d, %v; want 1 left", i+1, n, err)
			}
		}
		if e.rdb.Exists(ctx, rediscore.MarkerKey("k", "r1")).Val() != 1 {
			t.Fatal("a release that left a hold wrote no marker")
		}
		outer := locker.ReleaseRequest{Key: "k", Owner: "o", ID: "r2", Fresh: true}
		if n, err := e.b.Release(ctx, outer); err != nil || n != 0 {
			t.Fatalf("outer release = %d, %v; want 0 left", n, err)
		}
		if e.rdb.Exists(ctx, rediscore.MarkerKey("k", "r2")).Val() != 0 {
			t.Fatal("a fresh owner's last release wrote a marker")
		}
		// Another owner takes the key; the last release, sent again, leaves its hold alone.
		other := locker.AcquireRequest{Key: "k", Owner: "p", TTL: time.Minute, Fresh: true}
		if a, err := e.b.Acquire(ctx, other); err != nil || a.Holds != 1 {
			t.Fatalf("another owner = %+v, %v", a, err)
		}
		for _, r := range []locker.ReleaseRequest{outer, inner} {
			if _, err := e.b.Release(ctx, r); (r.ID == "r2") != errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("release %s sent again = %v", r.ID, err)
			}
		}
		if st, err := e.b.Inspect(ctx, "k"); err != nil || st.Owner != "p" || st.Holds != 1 {
			t.Fatalf("after the releases sent again: %+v, %v; want p's hold untouched", st, err)
		}
	})
}
