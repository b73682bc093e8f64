package rediscore_test

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// An uncontended Lock+Unlock of a Client runs two scripts and six commands inside them, and
// nothing else: EXISTS (the lock, the acquire's marker and the queue at once), HSET and PEXPIRE
// (the lock, QUIET), then HGETALL, DEL and the SET of the Unlock's marker. No queue is read and
// no notice is sent: nobody asked for the key.
func TestUncontendedLockUnlockCommands(t *testing.T) {
	srv := redistest.StartServer(t)
	if srv == nil {
		return
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	c := locker.New(goredis.New(rdb))
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	lockUnlock := func(key string) {
		l, err := c.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	lockUnlock("warm-up") // loads the scripts
	srv.Do(t, "CONFIG", "RESETSTAT")
	const n = 20
	for i := range n {
		lockUnlock(fmt.Sprint("key-", i))
	}
	got := commandCalls(t, srv)
	want := map[string]int{"evalsha": 2 * n, "exists": n, "hset": n, "pexpire": n, "hgetall": n, "del": n, "set": n}
	if !maps.Equal(got, want) {
		t.Fatalf("commands for %d uncontended Lock+Unlock: %v, want %v", n, got, want)
	}
}

// commandCalls returns the calls of each command in INFO commandstats, but CONFIG and INFO.
func commandCalls(t *testing.T, srv *redistest.Server) map[string]int {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "commandstats").(string)
	calls := make(map[string]int)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok || strings.HasPrefix(name, "config") || name == "info" {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		calls[name] = n
	}
	return calls
}

// A lock taken by the acquire's fast path is QUIET, and its release sends no notice; a refused
// request, waiting or not, makes it a plain lock, whose release sends one, and so does a release
// that leaves its owner holds (a release of the last hold, sent again, must then find its
// marker, not the owner's one hold: TestFreshReleaseLeavesNoMarker).
func TestQuietLock(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{quiet}"
		l := e.listen(t, k)
		fresh := func(owner string) locker.AcquireRequest {
			return locker.AcquireRequest{Key: k, Owner: owner, TTL: time.Minute, ID: "a-" + owner, Fresh: true, Wait: time.Minute}
		}
		last := func(owner string) locker.ReleaseRequest {
			return locker.ReleaseRequest{Key: k, Owner: owner, ID: "r-" + owner, Fresh: true, ReplyWindow: time.Second}
		}
		e.acquire(t, fresh("A"))
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "A": "1"})
		e.release(t, last("A"), 0)
		l.none(t, "the release of a QUIET lock")

		for _, refused := range []locker.AcquireRequest{
			{Key: k, Owner: "T", TTL: time.Minute}, // a TryLock: no queue
			fresh("W"),                             // a Lock that waits: an entry in the queue
		} {
			holder := "B-" + refused.Owner // a fresh owner holds once
			e.acquire(t, fresh(holder))
			if a := e.acquire(t, refused); a.Holds != 0 {
				t.Fatalf("%s's Acquire of a held key = %+v", refused.Owner, a)
			}
			e.wantHash(t, k, map[string]string{"": "locker", holder: "1"})
			e.release(t, last(holder), 0)
			l.notice(t, k, "the release of a lock refused to "+refused.Owner)
			e.b.Dequeue(t.Context(), k, refused.Owner)
		}

		e.acquire(t, fresh("C"))
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "C", TTL: time.Minute, ID: "c2", Reentry: true})
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "C": "2"})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "C", ID: "c3"}, 1)
		e.wantHash(t, k, map[string]string{"": "locker", "C": "1"})
		e.release(t, last("C"), 0)
		l.notice(t, k, "the release of a lock that stopped being QUIET")
	})
}

// Only a fresh owner's acquire makes a lock QUIET: an owner that held the key before may have a
// release of that time still to come, sent again, which must find its marker (here: after a
// ForceRelease, the owner takes the key again without Fresh, and its earlier release, which left
// it a hold, is sent again).
func TestQuietOnlyForFreshOwners(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{quiet}:again"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "O", TTL: time.Minute, ID: "a1", Fresh: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "O", TTL: time.Minute, ID: "a2", Reentry: true})
		inner := locker.ReleaseRequest{Key: k, Owner: "O", ID: "r1", Fresh: true}
		e.release(t, inner, 1)
		if ok, err := e.b.ForceRelease(t.Context(), k); !ok || err != nil {
			t.Fatalf("ForceRelease = %v, %v", ok, err)
		}
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "O", TTL: time.Minute})
		e.wantHash(t, k, map[string]string{"": "locker", "O": "1"})
		e.release(t, inner, 1) // sent again: the first outcome, and the hold stays
		e.wantHash(t, k, map[string]string{"": "locker", "O": "1"})
	})
}

// A copy of a fresh owner's acquire, sent again after the owner's lease ended, gives it a hold
// on a QUIET lock; a release of that owner that applied before (it left a hold, and its marker)
// and is sent again then reports its first outcome, whatever its ReplyWindow, and removes
// nothing.
func TestQuietReleaseSentAgainAfterAnAcquireSentAgain(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{quiet}:ghost"
		first := locker.AcquireRequest{Key: k, Owner: "O", TTL: time.Minute, ID: "a1", Fresh: true}
		e.acquire(t, first)
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "O", TTL: time.Minute, ID: "a2", Reentry: true})
		inner := locker.ReleaseRequest{Key: k, Owner: "O", ID: "r1", Fresh: true}
		e.release(t, inner, 1)
		if ok, err := e.b.ForceRelease(t.Context(), k); !ok || err != nil { // the lease ends
			t.Fatalf("ForceRelease = %v, %v", ok, err)
		}
		e.acquire(t, first) // sent again
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "O": "1"})
		e.release(t, inner, 1)
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "O": "1"})
	})
}
