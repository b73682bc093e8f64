package rediscore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
)

// holdTwice makes the fresh owner "o" hold "k" twice, straight on the backend.
func holdTwice(t *testing.T, e *kindEnv) {
	t.Helper()
	acq := locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Minute, ID: "a1", Fresh: true}
	if _, err := e.b.Acquire(t.Context(), acq); err != nil {
		t.Fatal(err)
	}
	acq.ID, acq.Fresh, acq.Reentry = "a2", false, true
	if _, err := e.b.Acquire(t.Context(), acq); err != nil {
		t.Fatal(err)
	}
}

// A release with Fresh that removes the owner's last hold writes no marker, while one that leaves
// holds does; the first, sent again, finds nothing and removes nothing, and the second reports
// the first outcome. (The Client sets Fresh on an Unlock's release only with a ReplyWindow: see
// TestReplyWindowMarker.)
func TestFreshReleaseLeavesNoMarker(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		ctx := t.Context()
		holdTwice(t, e) // released below with Fresh
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

// A fresh owner's last release with a ReplyWindow writes a marker that lives the window (rounded
// up to whole milliseconds), not RequestWindow: sent again within it, the release reports the
// first outcome (0 left), and later it finds nothing and removes nothing. A release that leaves
// holds, and a release without Fresh, are remembered for RequestWindow whatever the window says.
func TestReplyWindowMarker(t *testing.T) {
	const window = 1500*time.Millisecond + 1 // rounded up: 1501 ms
	onBoth(t, func(t *testing.T, e *kindEnv) {
		ctx := t.Context()
		holdTwice(t, e)
		inner := locker.ReleaseRequest{Key: "k", Owner: "o", ID: "r1", Fresh: true, ReplyWindow: window}
		if n, err := e.b.Release(ctx, inner); err != nil || n != 1 {
			t.Fatalf("inner release = %d, %v; want 1 left", n, err)
		}
		if d := e.pttl(t, rediscore.MarkerKey("k", "r1")); d <= locker.RequestWindow-time.Second || d > locker.RequestWindow {
			t.Fatalf("the marker of a release that left a hold lives %v, want %v", d, locker.RequestWindow)
		}
		outer := locker.ReleaseRequest{Key: "k", Owner: "o", ID: "r2", Fresh: true, ReplyWindow: window}
		for i := range 2 {
			if n, err := e.b.Release(ctx, outer); err != nil || n != 0 {
				t.Fatalf("outer release (send %d) = %d, %v; want 0 left", i+1, n, err)
			}
			if d := e.pttl(t, rediscore.MarkerKey("k", "r2")); d <= window-time.Second || d > 1501*time.Millisecond {
				t.Fatalf("the marker of a fresh owner's last release (send %d) lives %v, want %v", i+1, d, 1501*time.Millisecond)
			}
		}
		// A release without Fresh that leaves no hold: RequestWindow.
		plain := locker.AcquireRequest{Key: "j", Owner: "p", TTL: time.Minute, Fresh: true}
		if _, err := e.b.Acquire(ctx, plain); err != nil {
			t.Fatal(err)
		}
		stale := locker.ReleaseRequest{Key: "j", Owner: "p", ID: "r3", ReplyWindow: window}
		if n, err := e.b.Release(ctx, stale); err != nil || n != 0 {
			t.Fatalf("release without Fresh = %d, %v; want 0 left", n, err)
		}
		if d := e.pttl(t, rediscore.MarkerKey("j", "r3")); d <= locker.RequestWindow-time.Second {
			t.Fatalf("the marker of a release without Fresh lives %v, want %v", d, locker.RequestWindow)
		}
		if e.m == nil {
			return // the rest moves the clock
		}
		e.advance(1500 * time.Millisecond)
		if n, err := e.b.Release(ctx, outer); err != nil || n != 0 {
			t.Fatalf("outer release sent again 1500 ms later = %d, %v; want the first outcome, 0 left", n, err)
		}
		e.advance(1501 * time.Millisecond) // the copy above set the marker's life again
		if e.rdb.Exists(ctx, rediscore.MarkerKey("k", "r2")).Val() != 0 {
			t.Fatal("the marker outlived its window")
		}
		other := locker.AcquireRequest{Key: "k", Owner: "q", TTL: time.Minute, Fresh: true}
		if a, err := e.b.Acquire(ctx, other); err != nil || a.Holds != 1 {
			t.Fatalf("another owner = %+v, %v", a, err)
		}
		if _, err := e.b.Release(ctx, outer); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("outer release sent again after its window = %v, want ErrNotHeld", err)
		}
		if n, err := e.b.Release(ctx, inner); err != nil || n != 1 {
			t.Fatalf("inner release sent again = %d, %v; want the first outcome, 1 left", n, err)
		}
		if st, err := e.b.Inspect(ctx, "k"); err != nil || st.Owner != "q" || st.Holds != 1 {
			t.Fatalf("after the releases sent again: %+v, %v; want q's hold untouched", st, err)
		}
	})
}

// The Unlock of a plain Lock leaves one marker, which lives until the Unlock's deadline
// (WithUnlockTimeout) and no longer; the Unlock of a re-entered lease, which leaves a hold,
// leaves one for RequestWindow.
func TestUnlockMarkerLivesUntilItsDeadline(t *testing.T) {
	const unlock = 2 * time.Second
	e := onMiniredis(t) // its clock stands still: the window is the whole timeout
	c := locker.New(e.b, locker.WithUnlockTimeout(unlock), locker.WithTTL(time.Hour))
	defer c.Close()
	ctx := t.Context()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Lock(l.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	markers := func() []string {
		t.Helper()
		var ms []string
		for _, k := range e.m.Keys() {
			if strings.Contains(k, ":req:") {
				ms = append(ms, k)
			}
		}
		return ms
	}
	before := markers() // the re-entry's
	if err := inner.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	var short []string
	for _, k := range markers() {
		d := e.pttl(t, k)
		switch {
		case d > locker.RequestWindow-time.Second:
		case d > unlock-time.Second && d <= unlock:
			short = append(short, k)
		default:
			t.Errorf("marker %q lives %v, want %v or %v", k, d, locker.RequestWindow, unlock)
		}
	}
	if len(before) != 1 || len(short) != 1 || len(markers()) != 3 {
		t.Fatalf("markers: %q before the Unlocks, %q after (%q short), want the re-entry's, then both releases', the outer's short", before, markers(), short)
	}
	e.advance(e.pttl(t, short[0]) - time.Millisecond)
	if !e.m.Exists(short[0]) {
		t.Fatal("the outer Unlock's marker went before its window ended")
	}
	e.advance(time.Millisecond)
	if e.m.Exists(short[0]) {
		t.Fatalf("the outer Unlock's marker outlived its window (%v)", unlock)
	}
	if n := len(markers()); n != 2 {
		t.Fatalf("%d markers left, want the re-entry's and the inner release's", n)
	}
}
