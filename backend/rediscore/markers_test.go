package rediscore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
)

// A release with Fresh that removes the owner's last hold writes no marker, while one that leaves
// holds does; the first, sent again, finds nothing and removes nothing, and the second reports
// the first outcome. (The Client does not set Fresh on releases: see Client.release.)
func TestFreshReleaseLeavesNoMarker(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		ctx := t.Context()
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
