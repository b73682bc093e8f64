package rediscore_test

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
)

// The layout of semaphores on the server (lua/lib.lua) and their edge cases, as kinds_test.go
// checks shared holds.

// permit is a semaphore's holder's field, read back: its holds, the end of its own lease (0 for
// a lone holder, whose lease is the key's TTL) and its permit's fencing token (0 for none).
type permit struct {
	holds      int
	end, token int64
}

// permits returns the semaphore at key as the server has it: its marker and each holder's field,
// failing the test on a field that is not "<holds>[@<end>][#<token>]".
func (e *kindEnv) permits(t *testing.T, key string) (string, map[string]permit) {
	t.Helper()
	h := e.hash(t, key)
	out := make(map[string]permit)
	for owner, v := range h {
		if owner == "" {
			continue
		}
		var p permit
		rest, token, fenced := strings.Cut(v, "#")
		holds, end, ended := strings.Cut(rest, "@")
		var errs [3]error
		p.holds, errs[0] = strconv.Atoi(holds)
		if ended {
			p.end, errs[1] = strconv.ParseInt(end, 10, 64)
		}
		if fenced {
			p.token, errs[2] = strconv.ParseInt(token, 10, 64)
		}
		if err := errors.Join(errs[:]...); err != nil || p.holds < 1 || (ended && p.end <= 0) || (fenced && p.token <= 0) {
			t.Fatalf("%s = %v: holder %s's field %q is not a permit's", key, h, owner, v)
		}
		out[owner] = p
	}
	return h[""], out
}

// wantPermits fails the test unless the semaphore at key has the marker of limit and holders
// with these holds and tokens (0: none), each field with the end of its own lease (even a lone
// holder's), after now on the server's clock. It returns the holders' fields.
func (e *kindEnv) wantPermits(t *testing.T, key string, limit int, holds map[string]int, tokens map[string]uint64) map[string]permit {
	t.Helper()
	mark, got := e.permits(t, key)
	now := e.micros(t)
	if want := fmt.Sprint("locker:permits:", limit); mark != want {
		t.Fatalf("%s: marker %q, want %q", key, mark, want)
	}
	if len(got) != len(holds) {
		t.Fatalf("%s: holders %+v, want %v", key, got, holds)
	}
	for owner, n := range holds {
		p, ok := got[owner]
		switch {
		case !ok || p.holds != n || uint64(p.token) != tokens[owner]:
			t.Fatalf("%s: holders %+v, want %s with %d holds and token %d", key, got, owner, n, tokens[owner])
		case p.end <= now:
			t.Fatalf("%s: holders %+v: %s's lease must end after now (%d µs) on the field", key, got, owner, now)
		}
	}
	return got
}

// A semaphore's permits on the server: the first stores the limit in the marker, each holder's
// field has its own lease (the first's too) and the token its permit drew; a re-entry reports
// that token (none without Fence); a refusal the permits taken and the soonest lease; a request
// with another limit, or a lock's, changes nothing; Inspect reports the limit and each holder; a
// release that ends a permit sends a notice, and the last one frees the key for a lock.
func TestSemaphoreLayout(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{sem}:layout"
		l := e.listen(t, k)
		permitOf := func(owner string, ttl time.Duration) locker.AcquireRequest {
			return locker.AcquireRequest{Key: k, Owner: owner, TTL: ttl, Limit: 2, Fence: true}
		}
		a := e.acquire(t, permitOf("A", 20*time.Second))
		if a.Holds != 1 || a.Token == 0 {
			t.Fatalf("the first permit = %+v, want 1 hold and a token", a)
		}
		e.wantPermits(t, k, 2, map[string]int{"A": 1}, map[string]uint64{"A": a.Token})
		if d := e.pttl(t, k); d <= 19*time.Second || d > 20*time.Second+2*time.Millisecond {
			t.Fatalf("PTTL of a lone permit's key = %v, want just past its lease, 20s (+2ms)", d)
		}
		b := e.acquire(t, permitOf("B", 10*time.Second))
		if b.Holds != 1 || b.Token <= a.Token {
			t.Fatalf("the second permit = %+v, want 1 hold and a token over %d", b, a.Token)
		}
		tokens := map[string]uint64{"A": a.Token, "B": b.Token}
		e.wantPermits(t, k, 2, map[string]int{"A": 1, "B": 1}, tokens)
		if again := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", TTL: 20 * time.Second, Limit: 2, Fence: true, Reentry: true}); again.Holds != 2 || again.Token != a.Token {
			t.Fatalf("A's re-entry = %+v, want 2 holds and A's token %d", again, a.Token)
		}
		if again := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", TTL: 20 * time.Second, Limit: 2, Shared: true, Reentry: true}); again.Holds != 3 || again.Token != 0 {
			t.Fatalf("A's re-entry without Fence = %+v, want 3 holds and no token", again)
		}
		fields := e.wantPermits(t, k, 2, map[string]int{"A": 3, "B": 1}, tokens)
		if fields["A"].end <= fields["B"].end {
			t.Fatalf("fields %+v: A's lease (20s) must end after B's (10s)", fields)
		}

		c := e.acquire(t, permitOf("C", time.Minute))
		if c.Holds != 0 || c.Token != 0 || c.Taken != 2 || c.TTL <= 9*time.Second || c.TTL > 10*time.Second {
			t.Fatalf("a third permit of 2 = %+v, want refused: 2 taken, the soonest lease (B's, 10s)", c)
		}
		before := e.hash(t, k)
		for _, req := range []locker.AcquireRequest{
			{Key: k, Owner: "C"},
			{Key: k, Owner: "C", Shared: true, Wait: time.Second},
			{Key: k, Owner: "C", Limit: 3, Fence: true},
			{Key: k, Owner: "A", Limit: 1, Reentry: true},
			{Key: k, Owner: "A", Reentry: true},
		} {
			req.TTL = time.Minute
			if _, err := e.b.Acquire(t.Context(), req); !errors.Is(err, locker.ErrLimitMismatch) {
				t.Fatalf("Acquire %+v on a semaphore of 2 = %v, want ErrLimitMismatch", req, err)
			}
		}
		if after := e.hash(t, k); !maps.Equal(before, after) {
			t.Fatalf("requests with another limit changed the semaphore: %v, then %v", before, after)
		}
		if q, _ := e.entries(t, k); len(q) != 0 {
			t.Fatalf("queue %v: a request with another limit queued", q)
		}

		st := e.inspect(t, k)
		if !st.Locked || st.Limit != 2 || st.Shared || st.Readers != 0 || st.Owner != "A" || st.Holds != 4 ||
			st.TTL <= 19*time.Second || st.TTL > 20*time.Second || len(st.Holders) != 2 {
			t.Fatalf("Inspect = %+v, want a semaphore of 2: A first, 4 holds, the longest lease (20s)", st)
		}
		if h := st.Holders; h[0].Owner != "A" || h[0].Holds != 3 || h[0].TTL <= 19*time.Second || h[0].TTL > 20*time.Second ||
			h[1].Owner != "B" || h[1].Holds != 1 || h[1].TTL <= 9*time.Second || h[1].TTL > 10*time.Second {
			t.Fatalf("Holders = %+v, want A (3 holds, 20s) and B (1, 10s)", h)
		}

		l.none(t, "acquires")
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "A", Shared: true}, 2)
		if _, err := e.b.Release(t.Context(), locker.ReleaseRequest{Key: k, Owner: "A"}); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("an exclusive release of a permit = %v, want ErrNotHeld", err)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "A", Shared: true}, 1)
		l.none(t, "releases that leave A holds")
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "A", Shared: true}, 0)
		l.notice(t, k, "the release of A's permit, B's still held")
		e.wantPermits(t, k, 2, map[string]int{"B": 1}, tokens)

		c = e.acquire(t, permitOf("C", time.Minute))
		if c.Holds != 1 || c.Token <= b.Token {
			t.Fatalf("C's permit once A's is free = %+v, want a token over %d", c, b.Token)
		}
		tokens["C"] = c.Token
		e.wantPermits(t, k, 2, map[string]int{"B": 1, "C": 1}, tokens)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "B", Shared: true}, 0)
		l.notice(t, k, "the release of B's permit")
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "C", Shared: true}, 0)
		l.notice(t, k, "the release of the last permit")
		if n := e.rdb.Exists(t.Context(), k).Val(); n != 0 {
			t.Fatalf("the last permit's release left %v", e.hash(t, k))
		}
		if w := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Fence: true}); w.Holds != 1 || w.Token <= c.Token {
			t.Fatalf("a lock on the freed semaphore = %+v, want it granted with a token over %d", w, c.Token)
		}
		if _, err := e.b.Acquire(t.Context(), permitOf("A", time.Minute)); !errors.Is(err, locker.ErrLimitMismatch) {
			t.Fatalf("a permit request on a lock = %v, want ErrLimitMismatch", err)
		}
		if _, err := e.b.Acquire(t.Context(), permitOf("W", time.Minute)); !errors.Is(err, locker.ErrLimitMismatch) {
			t.Fatalf("a permit request of the lock's holder = %v, want ErrLimitMismatch", err)
		}
	})
}

// A holder whose lease ended counts for nothing: its permit is free, its field goes at the next
// write, and it renews nothing; each holder's renewal sets its own lease alone.
func TestSemaphoreLeaseEnds(t *testing.T) {
	e := onMiniredis(t)
	const k = "{sem}:ends"
	req := func(owner string, ttl time.Duration) locker.AcquireRequest {
		return locker.AcquireRequest{Key: k, Owner: owner, TTL: ttl, Limit: 2}
	}
	e.acquire(t, req("A", time.Second))
	e.acquire(t, req("B", 10*time.Second))
	// A held alone until B came: its lease is its own all the same, to the microsecond.
	if c := e.acquire(t, req("C", time.Minute)); c.Holds != 0 || c.Taken != 2 || c.TTL != time.Second {
		t.Fatalf("a third permit = %+v, want refused with A's lease, 1s", c)
	}
	e.advance(1500 * time.Millisecond)
	if errs := e.b.Renew(t.Context(), []locker.Renewal{{Key: k, Owner: "A", TTL: time.Minute}, {Key: k, Owner: "B", TTL: 20 * time.Second}}); !errors.Is(errs[0], locker.ErrNotHeld) || errs[1] != nil {
		t.Fatalf("renewals of A (ended) and B = %v, want ErrNotHeld and nil", errs)
	}
	if c := e.acquire(t, req("C", time.Minute)); c.Holds != 1 {
		t.Fatalf("a permit once A's lease ended = %+v, want it", c)
	}
	e.wantPermits(t, k, 2, map[string]int{"B": 1, "C": 1}, nil)
	st := e.inspect(t, k)
	if len(st.Holders) != 2 || st.Holders[0] != (locker.Holder{Owner: "B", Holds: 1, TTL: 20 * time.Second}) ||
		st.Holders[1] != (locker.Holder{Owner: "C", Holds: 1, TTL: time.Minute}) || st.TTL != time.Minute {
		t.Fatalf("Inspect = %+v, want B (20s, renewed; it held alone until C came) and C (1m)", st)
	}
	e.advance(time.Minute)
	if st := e.inspect(t, k); st.Locked || st.Holders != nil {
		t.Fatalf("Inspect after every lease ended = %+v, want free", st)
	}
}

// A permit held once passes to a fresh owner in one step: its own lease, a new token, the
// semaphore's limit kept, no other permit changed, no notice; sent again, it reports the
// taker's holds and token; a permit held twice is not handed off.
func TestSemaphoreHandOff(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{sem}:handoff"
		l := e.listen(t, k)
		a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", Limit: 3, Fence: true})
		b := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Limit: 3, Fence: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Limit: 3, Reentry: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "T", Limit: 3, Fair: true, Wait: time.Minute}) // the last permit
		ho := locker.HandOffRequest{Key: k, From: "A", To: "T2", TTL: time.Minute, Fence: true}
		for i := range 2 {
			r, err := e.b.HandOff(t.Context(), ho)
			if err != nil || r.Holds != 1 || r.Token <= b.Token || r.Queued != 0 {
				t.Fatalf("hand-off (send %d) = %+v, %v; want 1 hold and a token over %d", i+1, r, err, b.Token)
			}
			e.wantPermits(t, k, 3, map[string]int{"B": 2, "T": 1, "T2": 1}, map[string]uint64{"B": b.Token, "T2": r.Token})
		}
		if _, err := e.b.HandOff(t.Context(), locker.HandOffRequest{Key: k, From: "B", To: "U", TTL: time.Minute}); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("the hand-off of a permit held twice = %v, want ErrNotHeld", err)
		}
		if _, err := e.b.HandOff(t.Context(), locker.HandOffRequest{Key: k, From: "A", To: "U", TTL: time.Minute}); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("a hand-off from an owner that handed its permit off = %v, want ErrNotHeld", err)
		}
		l.none(t, "hand-offs")
		if r, err := e.b.HandOff(t.Context(), locker.HandOffRequest{Key: k, From: "B", To: "T2", TTL: time.Minute}); err != nil || r.Holds != 1 || r.Token != 0 {
			t.Fatalf("the hand-off sent again without Fence = %+v, %v; want T2's hold and no token", r, err)
		}
		if a.Token >= b.Token {
			t.Fatalf("tokens %d, %d: want them increasing", a.Token, b.Token)
		}
	})
}

// A hash whose marker looks like a semaphore's but is not one ('locker:permits:' and no
// positive integer) is not a lock: it is left as it is.
func TestSemaphoreMarkerNotALock(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		for i, mark := range []string{"locker:permits:", "locker:permits:0", "locker:permits:03", "locker:permits:x", "locker:permits:2 "} {
			k := fmt.Sprintf("{sem}:foreign%d", i)
			if err := e.rdb.HSet(t.Context(), k, "", mark, "o", "1").Err(); err != nil {
				t.Fatal(err)
			}
			before := e.hash(t, k)
			for _, req := range []locker.AcquireRequest{{Key: k, Owner: "p", Limit: 2}, {Key: k, Owner: "o", Limit: 2, Reentry: true}, {Key: k, Owner: "p", Shared: true}} {
				req.TTL = time.Minute
				if _, err := e.b.Acquire(t.Context(), req); !errors.Is(err, locker.ErrNotALock) {
					t.Fatalf("marker %q: Acquire %+v = %v, want ErrNotALock", mark, req, err)
				}
			}
			if _, err := e.b.Release(t.Context(), locker.ReleaseRequest{Key: k, Owner: "o", Shared: true}); !errors.Is(err, locker.ErrNotALock) {
				t.Fatalf("marker %q: Release = %v, want ErrNotALock", mark, err)
			}
			if _, err := e.b.Inspect(t.Context(), k); !errors.Is(err, locker.ErrNotALock) {
				t.Fatalf("marker %q: Inspect = %v, want ErrNotALock", mark, err)
			}
			if _, err := e.b.ForceRelease(t.Context(), k); !errors.Is(err, locker.ErrNotALock) {
				t.Fatalf("marker %q: ForceRelease = %v, want ErrNotALock", mark, err)
			}
			if errs := e.b.Renew(t.Context(), []locker.Renewal{{Key: k, Owner: "o", TTL: time.Minute}}); !errors.Is(errs[0], locker.ErrNotHeld) {
				t.Fatalf("marker %q: Renew = %v, want ErrNotHeld", mark, errs[0])
			}
			if after := e.hash(t, k); !maps.Equal(before, after) || e.pttl(t, k) != -1 {
				t.Fatalf("marker %q: the hash became %v (PTTL %v)", mark, after, e.pttl(t, k))
			}
		}
	})
}

// A fair permit request passes no live entry of the queue; a plain one passes them all. A
// permit request granted with entries behind it wakes them while a permit is still free.
func TestSemaphoreQueue(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{sem}:queue"
		req := func(owner string, fair bool) locker.AcquireRequest {
			return locker.AcquireRequest{Key: k, Owner: owner, TTL: time.Minute, Limit: 3, Fair: fair, Wait: time.Minute}
		}
		for _, o := range []string{"A", "B", "C"} {
			e.acquire(t, req(o, false))
		}
		for _, o := range []string{"F1", "F2", "F3"} {
			if r := e.acquire(t, req(o, true)); r.Holds != 0 || r.Taken != 3 {
				t.Fatalf("%s while 3 of 3 are taken = %+v, want refused", o, r)
			}
		}
		if r := e.acquire(t, req("P", false)); r.Holds != 0 || r.Taken != 3 {
			t.Fatalf("P while 3 of 3 are taken = %+v, want refused", r)
		}
		if q, _ := e.entries(t, k); !maps.Equal(q, map[string]string{"F1": "1:s", "F2": "2:s", "F3": "3:s", "P": "4:r"}) {
			t.Fatalf("queue %v, want F1, F2, F3 as fair readers, then P", q)
		}
		l := e.listen(t, k)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "A", Shared: true}, 0)
		l.notice(t, k, "a permit's release")
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "B", Shared: true}, 0)
		l.notice(t, k, "a permit's release")
		if r := e.acquire(t, req("F2", true)); r.Holds != 0 || r.Taken != 1 || r.TTL <= 0 {
			t.Fatalf("F2 behind F1 = %+v, want refused, 1 taken", r)
		}
		if r := e.acquire(t, req("F1", true)); r.Holds != 1 {
			t.Fatalf("F1 at the head = %+v, want it", r)
		}
		l.notice(t, k, "F1's permit, one still free and others waiting")
		if r := e.acquire(t, req("P", false)); r.Holds != 1 {
			t.Fatalf("a plain permit request behind F2 = %+v, want it: it passes the queue", r)
		}
		l.none(t, "P took the last permit free")
		if q, _ := e.entries(t, k); !maps.Equal(q, map[string]string{"F2": "2:s", "F3": "3:s"}) {
			t.Fatalf("queue %v, want F2 and F3", q)
		}
		if r := e.acquire(t, req("F2", true)); r.Holds != 0 || r.Taken != 3 {
			t.Fatalf("F2 while 3 of 3 are taken = %+v, want refused", r)
		}
	})
}

// A fresh permit request that waits may ask for a grant: its queue entry names the permit's
// limit (":p<n>" before the grant's lease); the release that ends a permit while the entry is at
// the head gives it one (its own lease and token; a grant record in place of its entry) and wakes
// it alone; the release of the last permit does so with a new semaphore; a Dequeue of the grantee
// gives the permit back, to the next one. An entry that asked for no grant gets a plain notice.
func TestSemaphoreGrants(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{sem}:grants"
		req := func(owner string, grant time.Duration) locker.AcquireRequest {
			return locker.AcquireRequest{Key: k, Owner: owner, TTL: time.Minute, ID: "id-" + owner, Fresh: true, Fence: true,
				Limit: 2, Wait: time.Minute, Grant: grant}
		}
		a, b := e.acquire(t, req("A", 0)), e.acquire(t, req("B", 0))
		for _, o := range []string{"W1", "W2", "W3"} {
			grant := 5 * time.Second
			if o == "W2" {
				grant = 0
			}
			if r := e.acquire(t, req(o, grant)); r.Holds != 0 {
				t.Fatalf("%s while 2 of 2 are taken = %+v, want refused", o, r)
			}
		}
		q := e.hash(t, rediscore.QueueKey(k))
		if !strings.HasPrefix(q["W1"], "1:r:") || !strings.HasSuffix(q["W1"], ":p2:5000f:id-W1") ||
			!strings.HasPrefix(q["W2"], "2:r:") || strings.Count(q["W2"], ":") != 2 {
			t.Fatalf("queue %v: want W1's entry asking for a permit of 2 (lease 5000 ms, a token, its ID), W2's for none", q)
		}
		l := e.listen(t, k)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "A", Shared: true}, 0)
		if got := l.next(t); got != k+"\n5:id-W1W1" {
			t.Fatalf("the release of A's permit: notice %q, want the grant to W1", got)
		}
		_, fields := e.permits(t, k)
		w1 := uint64(fields["W1"].token)
		if len(fields) != 2 || fields["B"].holds != 1 || fields["W1"].holds != 1 || w1 <= b.Token || b.Token <= a.Token {
			t.Fatalf("holders %+v after the grant: want B's permit and W1's, whose token is above B's, %d", fields, b.Token)
		}
		if got, _ := e.entries(t, k); got["W1"] != "1:g" {
			t.Fatalf("queue %v: want a grant record of W1", got)
		}
		st := e.inspect(t, k)
		if st.Queued != 2 || len(st.Holders) != 2 || st.Holders[1].Owner != "W1" || st.Holders[1].TTL > 5*time.Second || st.Holders[1].TTL <= 4*time.Second {
			t.Fatalf("Inspect = %+v, want B and W1 (the grant's lease, 5s), W2 and W3 queued", st)
		}
		if took := e.acquire(t, req("W1", 5*time.Second)); took.Holds != 1 || took.Token != w1 {
			t.Fatalf("W1 takes its grant: %+v, want 1 hold and its token %d", took, w1)
		}
		if d := fields["W1"].end; e.wantPermits(t, k, 2, map[string]int{"B": 1, "W1": 1}, map[string]uint64{"B": b.Token, "W1": w1})["W1"].end <= d {
			t.Fatal("W1's lease was not reset to its TTL when it took its grant")
		}

		e.release(t, locker.ReleaseRequest{Key: k, Owner: "B", Shared: true}, 0)
		l.notice(t, k, "a permit's release with W2, which asked for no grant, at the head")
		if r := e.acquire(t, req("W2", 0)); r.Holds != 1 {
			t.Fatalf("W2 after the notice = %+v, want the permit", r)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W1", Shared: true}, 0)
		if got := l.next(t); got != k+"\n5:id-W3W3" {
			t.Fatalf("the release of W1's permit: notice %q, want the grant to W3", got)
		}
		if err := e.b.Dequeue(t.Context(), k, "W3"); err != nil {
			t.Fatal(err)
		}
		l.notice(t, k, "W3's grant given back")
		if st := e.inspect(t, k); len(st.Holders) != 1 || st.Holders[0].Owner != "W2" || st.Queued != 0 {
			t.Fatalf("Inspect after W3 gave its grant back = %+v, want W2 alone, nobody queued", st)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W2", Shared: true}, 0)
		l.notice(t, k, "the last permit's release, nobody queued")

		// The last permit's release gives the key to the head that asked for a permit: the first
		// permit of a new semaphore.
		const k1 = "{sem}:grants1"
		one := func(owner string) locker.AcquireRequest {
			return locker.AcquireRequest{Key: k1, Owner: owner, TTL: time.Minute, ID: "id-" + owner, Fresh: true, Limit: 1, Wait: time.Minute, Grant: time.Second}
		}
		e.acquire(t, one("X"))
		if r := e.acquire(t, one("Y")); r.Holds != 0 {
			t.Fatalf("Y with 1 of 1 taken = %+v, want refused", r)
		}
		l1 := e.listen(t, k1)
		e.release(t, locker.ReleaseRequest{Key: k1, Owner: "X", Shared: true}, 0)
		if got := l1.next(t); got != k1+"\n4:id-YY" {
			t.Fatalf("the release of the last permit: notice %q, want the grant to Y", got)
		}
		e.wantPermits(t, k1, 1, map[string]int{"Y": 1}, nil)
		if st := e.inspect(t, k1); st.Limit != 1 || len(st.Holders) != 1 || st.Holders[0].TTL > time.Second {
			t.Fatalf("Inspect = %+v, want Y's permit of a semaphore of 1, with the grant's lease", st)
		}
	})
}
