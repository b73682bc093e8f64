package rediscore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// The tests of this file check the layout of readers' own leases (lua/lib.lua, readReaders) on
// miniredis, whose clock they set: a lone reader's field is its holds alone and its lease the
// key's TTL; once readers overlap each has the end of its own lease, which only its own calls
// set, and the key's TTL runs just past the latest; a reader whose lease ended holds nothing.

// wantEnd fails the test unless owner's field on key carries the end of its lease at want (on
// miniredis's clock), within the millisecond the layout may round it up by.
func (e *kindEnv) wantEnd(t *testing.T, key, owner string, want time.Time) {
	t.Helper()
	got := e.readerEnd(t, key, owner)
	if d := got - want.UnixMicro(); d < 0 || d > 1000 {
		t.Fatalf("%s: reader %s's lease ends %dµs after %v, want within [0, 1000]", key, owner, d, want.Sub(e.now))
	}
}

// wantTTL fails the test unless key's TTL is want, or at most 3ms more: when every reader has
// an end, the key outlives the latest by up to 2ms, and an end taken from the key's TTL is
// rounded up to a whole millisecond.
func (e *kindEnv) wantTTL(t *testing.T, key string, want time.Duration) {
	t.Helper()
	if got := e.pttl(t, key); got < want || got > want+3*time.Millisecond {
		t.Fatalf("%s: TTL %v, want %v (+3ms)", key, got, want)
	}
}

// Readers with leases of 10s, 1s and 20s on one key: the short one neither shortens nor
// lengthens the others', the key's TTL follows the latest lease, and each hold ends with its own
// lease, whoever else still reads.
func TestReaderLeasesOwnEach(t *testing.T) {
	e := onMiniredis(t)
	ctx, k := t.Context(), "{leases}:own"
	start := e.now
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", Shared: true, TTL: 10 * time.Second})
	e.wantHash(t, k, map[string]string{"": "locker:shared", "A": "1"}) // alone: no end of its own
	if v := e.hash(t, k)["A"]; v != "1" {
		t.Fatalf("a lone reader's field = %q, want its holds alone", v)
	}
	e.wantTTL(t, k, 10*time.Second)

	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Shared: true, TTL: time.Second})
	e.wantHash(t, k, map[string]string{"": "locker:shared", "A": "1", "B": "1"})
	e.wantEnd(t, k, "A", start.Add(10*time.Second)) // the key's TTL it had
	e.wantEnd(t, k, "B", start.Add(time.Second))
	e.wantTTL(t, k, 10*time.Second)

	e.release(t, locker.ReleaseRequest{Key: k, Owner: "B", Shared: true}, 0)
	e.wantHash(t, k, map[string]string{"": "locker:shared", "A": "1"})
	e.wantEnd(t, k, "A", start.Add(10*time.Second))
	e.wantTTL(t, k, 10*time.Second)

	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "C", Shared: true, TTL: 20 * time.Second})
	e.wantEnd(t, k, "A", start.Add(10*time.Second))
	e.wantEnd(t, k, "C", start.Add(20*time.Second))
	e.wantTTL(t, k, 20*time.Second)

	// B re-enters after its lease ended: a new hold, with a lease of its own.
	e.advance(2 * time.Second)
	if _, err := e.b.Acquire(ctx, locker.AcquireRequest{Key: k, Owner: "B", Shared: true, Reentry: true, TTL: time.Second}); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("re-entry of a reader whose lease ended = %v, want ErrNotHeld", err)
	}
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Shared: true, TTL: time.Second}); a.Holds != 1 {
		t.Fatalf("a new RLock of B = %+v, want one hold", a)
	}
	e.wantEnd(t, k, "B", start.Add(3*time.Second))

	// A's lease ends at 10s: it holds nothing, though C still reads and nothing wrote since.
	e.advance(8*time.Second + time.Millisecond)
	if st := e.inspect(t, k); st.Readers != 1 || st.Owner != "C" || st.Holds != 1 || st.TTL != 10*time.Second-time.Millisecond {
		t.Fatalf("Inspect after A's lease ended = %+v, want C reading alone, 9.999s left", st)
	}
	if err := e.b.Renew(ctx, []locker.Renewal{{Key: k, Owner: "A", TTL: time.Minute}})[0]; !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Renew of a reader whose lease ended = %v, want ErrNotHeld", err)
	}
	if _, err := e.b.Release(ctx, locker.ReleaseRequest{Key: k, Owner: "A", Shared: true}); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Release of a reader whose lease ended = %v, want ErrNotHeld", err)
	}
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W"}); a.Holds != 0 || a.TTL != 10*time.Second-time.Millisecond {
		t.Fatalf("a writer while C reads = %+v, want refused with C's lease", a)
	}
	e.release(t, locker.ReleaseRequest{Key: k, Owner: "C", Shared: true}, 0)
	if n := e.rdb.Exists(ctx, k).Val(); n != 0 {
		t.Fatalf("after the last reader left, %s exists (%v)", k, e.hash(t, k))
	}
}

// A reader's renewal sets its own end alone, a shorter one too; when the reader whose lease ends
// last leaves, the key's TTL shrinks to the latest end left. Once every reader's lease has ended,
// the key is free for a writer, even in the moment the key outlives them.
func TestReaderLeasesRenewAndShrink(t *testing.T) {
	e := onMiniredis(t)
	ctx, k := t.Context(), "{leases}:renew"
	start := e.now
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", Shared: true, TTL: 5 * time.Second})
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Shared: true, TTL: 3 * time.Second})
	if err := e.b.Renew(ctx, []locker.Renewal{{Key: k, Owner: "A", TTL: 2 * time.Second}})[0]; err != nil {
		t.Fatal(err)
	}
	e.wantEnd(t, k, "A", start.Add(2*time.Second))
	e.wantEnd(t, k, "B", start.Add(3*time.Second))
	e.wantTTL(t, k, 3*time.Second)
	e.release(t, locker.ReleaseRequest{Key: k, Owner: "B", Shared: true}, 0)
	e.wantEnd(t, k, "A", start.Add(2*time.Second))
	e.wantTTL(t, k, 2*time.Second)

	e.advance(2*time.Second + time.Millisecond/2) // A's end has passed; the key lasts 1.5ms more
	if e.rdb.Exists(ctx, k).Val() != 1 {
		t.Fatalf("%s has gone with its reader's end: this test wants the moment after", k)
	}
	if st := e.inspect(t, k); st.Locked {
		t.Fatalf("Inspect after every reader's lease ended = %+v, want free", st)
	}
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", TTL: time.Second}); a.Holds != 1 {
		t.Fatalf("a writer after every reader's lease ended = %+v, want the key", a)
	}
	e.wantHash(t, k, map[string]string{"": "locker", "W": "1"})
}

// A key written before readers had leases of their own (fields without an end, the key's TTL set
// by the latest reader) is read as it was meant: its readers end with the key's TTL, and keep
// that lease, as their end, when a new reader joins with a shorter one.
func TestReaderLeasesFromOlderLayout(t *testing.T) {
	e := onMiniredis(t)
	ctx, k := t.Context(), "{leases}:older"
	start := e.now
	if err := e.rdb.HSet(ctx, k, "", "locker:shared", "O1", "2", "O2", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.PExpire(ctx, k, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if st := e.inspect(t, k); st.Readers != 2 || st.Holds != 3 || st.TTL != 5*time.Second {
		t.Fatalf("Inspect of the older layout = %+v, want 2 readers, 3 holds, 5s", st)
	}
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "N", Shared: true, TTL: time.Second})
	e.wantHash(t, k, map[string]string{"": "locker:shared", "O1": "2", "O2": "1", "N": "1"})
	e.wantEnd(t, k, "O1", start.Add(5*time.Second))
	e.wantEnd(t, k, "O2", start.Add(5*time.Second))
	e.wantEnd(t, k, "N", start.Add(time.Second))
	e.wantTTL(t, k, 5*time.Second)
	e.release(t, locker.ReleaseRequest{Key: k, Owner: "O1", Shared: true}, 1)
	e.wantEnd(t, k, "O1", start.Add(5*time.Second))
	e.advance(time.Second)
	if st := e.inspect(t, k); st.Readers != 2 || st.Holds != 2 {
		t.Fatalf("Inspect after N's lease ended = %+v, want O1 and O2", st)
	}
}

// The same reproduction as the conformance suite's, at the level of the scripts: a reader with
// a short lease that joins and leaves never lets a writer in before the long reader's lease ends.
func TestReaderLeasesNoWriterBesideReader(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		ctx, k := context.Background(), "{leases}:writer"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "long", Shared: true, TTL: time.Hour})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "short", Shared: true, TTL: 50 * time.Millisecond})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "short", Shared: true}, 0)
		if d := e.pttl(t, k); d < 59*time.Minute {
			t.Fatalf("after the short reader left, the key's TTL is %v, want the long reader's hour", d)
		}
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", TTL: time.Second}); a.Holds != 0 {
			t.Fatalf("a writer beside a reader = %+v, want refused", a)
		}
		if _, err := e.b.ForceRelease(ctx, k); err != nil {
			t.Fatal(err)
		}
	})
}
