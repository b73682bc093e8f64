package rediscore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The tests of this file check the layout of shared holds and of the wait queue on the server
// (lua/lib.lua), and the edge cases of locker.KindLocker, through go-redis: on miniredis, whose
// clock they set (TIME and TTLs follow it), and, where the clock does not matter, on a real
// redis-server too (real Lua, SPUBLISH), when there is one.

// kindEnv is a Backend on a server, with a plain client to look at the server's keys.
type kindEnv struct {
	b   *rediscore.Backend
	rdb *redis.Client
	m   *miniredis.Miniredis // nil on a real server
	now time.Time            // miniredis's clock
}

// onMiniredis returns a kindEnv on a miniredis whose clock stands still until advance.
func onMiniredis(t *testing.T) *kindEnv {
	t.Helper()
	m := miniredis.NewMiniRedis()
	e := &kindEnv{m: m, now: time.UnixMilli(1_800_000_000_000)}
	m.SetTime(e.now)
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e.connect(t, m.Addr())
	return e
}

// onRedis returns a kindEnv on a redis-server of its own; it skips the test when there is none.
func onRedis(t *testing.T) *kindEnv {
	t.Helper()
	srv := redistest.StartServer(t)
	e := &kindEnv{}
	e.connect(t, srv.Addr)
	return e
}

func (e *kindEnv) connect(t *testing.T, addr string) {
	e.rdb = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { e.rdb.Close() })
	e.b = goredis.New(e.rdb)
}

// onBoth runs f on miniredis and on a real server.
func onBoth(t *testing.T, f func(t *testing.T, e *kindEnv)) {
	t.Run("miniredis", func(t *testing.T) { f(t, onMiniredis(t)) })
	t.Run("redis", func(t *testing.T) { f(t, onRedis(t)) })
}

// advance moves miniredis's clock (TIME, and every TTL) forward by d.
func (e *kindEnv) advance(d time.Duration) {
	e.now = e.now.Add(d)
	e.m.SetTime(e.now)
}

// hash returns the hash at key (empty when it does not exist).
func (e *kindEnv) hash(t *testing.T, key string) map[string]string {
	t.Helper()
	h, err := e.rdb.HGetAll(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	return h
}

// wantHash fails the test unless the hash at key is want. In shared mode, want gives each
// reader's holds: when readers overlap each value must be "<holds>@<end>", with an end of its
// own lease in microseconds that has not passed on the server's clock; a lone reader's may be
// its holds alone (its lease is the key's TTL).
func (e *kindEnv) wantHash(t *testing.T, key string, want map[string]string) {
	t.Helper()
	got := e.hash(t, key)
	if got[""] == "locker:shared" {
		now := e.micros(t)
		for owner, v := range got {
			holds, end, ok := strings.Cut(v, "@")
			if owner == "" {
				continue
			}
			if n, err := strconv.ParseInt(end, 10, 64); (!ok && len(got) > 2) || (ok && (err != nil || n <= now)) {
				t.Fatalf("%s = %v: reader %s's value, want it with the end of its lease, after now (%d µs), unless it reads alone", key, got, owner, now)
			}
			got[owner] = holds
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", key, got, want)
	}
}

// micros returns the server's clock (TIME) in microseconds.
func (e *kindEnv) micros(t *testing.T) int64 {
	t.Helper()
	now, err := e.rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// readerEnd returns the end of owner's lease, in microseconds, from its field in the shared
// lock at key.
func (e *kindEnv) readerEnd(t *testing.T, key, owner string) int64 {
	t.Helper()
	v := e.hash(t, key)[owner]
	_, end, _ := strings.Cut(v, "@")
	n, err := strconv.ParseInt(end, 10, 64)
	if err != nil {
		t.Fatalf("%s: reader %s's field %q has no end of its lease", key, owner, v)
	}
	return n
}

// pttl returns the key's PTTL (-2 when missing).
func (e *kindEnv) pttl(t *testing.T, key string) time.Duration {
	t.Helper()
	d, err := e.rdb.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// acquire calls Acquire with a TTL of 10s and the request's flags, failing the test on an error.
func (e *kindEnv) acquire(t *testing.T, req locker.AcquireRequest) locker.Acquisition {
	t.Helper()
	if req.TTL == 0 {
		req.TTL = 10 * time.Second
	}
	a, err := e.b.Acquire(t.Context(), req)
	if err != nil {
		t.Fatalf("Acquire %+v: %v", req, err)
	}
	return a
}

// release calls Release and fails the test on an error or a remaining count other than want.
func (e *kindEnv) release(t *testing.T, req locker.ReleaseRequest, want int) {
	t.Helper()
	n, err := e.b.Release(t.Context(), req)
	if err != nil || n != want {
		t.Fatalf("Release %+v = %d, %v; want %d", req, n, err, want)
	}
}

// inspect calls Inspect and fails the test on an error.
func (e *kindEnv) inspect(t *testing.T, key string) locker.State {
	t.Helper()
	st, err := e.b.Inspect(t.Context(), key)
	if err != nil {
		t.Fatalf("Inspect %s: %v", key, err)
	}
	return st
}

// entries returns the wait queue of key as the server has it: owner -> "<ticket>:<kind>" (the
// deadline left out), and the queue's counter.
func (e *kindEnv) entries(t *testing.T, key string) (map[string]string, string) {
	t.Helper()
	h := e.hash(t, rediscore.QueueKey(key))
	out := make(map[string]string, len(h))
	for owner, v := range h {
		if owner != "" {
			out[owner] = v[:strings.LastIndexByte(v, ':')]
		}
	}
	return out, h[""]
}

// deadline returns the deadline of owner's queue entry on key, on the server's clock.
func (e *kindEnv) deadline(t *testing.T, key, owner string) time.Time {
	t.Helper()
	v := e.hash(t, rediscore.QueueKey(key))[owner]
	var ticket, ms int64
	var kind string
	if _, err := fmt.Sscanf(strings.ReplaceAll(v, ":", " "), "%d %s %d", &ticket, &kind, &ms); err != nil {
		t.Fatalf("queue entry of %s = %q: %v", owner, v, err)
	}
	return time.UnixMilli(ms)
}

// listener receives what is published on a key's notice channel, in order, for a test that
// must tell a notice from none: it publishes a sentinel of its own and expects it first.
type listener struct {
	e       *kindEnv
	channel string
	ps      *redis.PubSub
}

func (e *kindEnv) listen(t *testing.T, key string) *listener {
	t.Helper()
	l := &listener{e: e, channel: rediscore.Channel(key)}
	if e.m != nil {
		l.ps = e.rdb.Subscribe(t.Context(), l.channel)
	} else {
		l.ps = e.rdb.SSubscribe(t.Context(), l.channel) // the scripts SPUBLISH on Redis 7
	}
	t.Cleanup(func() { l.ps.Close() })
	if _, err := l.ps.Receive(t.Context()); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	return l
}

// next returns the next message's payload.
func (l *listener) next(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	msg, err := l.ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no message on %s: %v", l.channel, err)
	}
	return msg.Payload
}

// notice fails the test unless a release notice of key is the next message.
func (l *listener) notice(t *testing.T, key, after string) {
	t.Helper()
	if got := l.next(t); got != key {
		t.Fatalf("after %s: message %q, want the notice %q", after, got, key)
	}
}

// none fails the test if a message came since the last one read: it publishes a sentinel and
// expects it next.
func (l *listener) none(t *testing.T, after string) {
	t.Helper()
	var err error
	if l.e.m != nil {
		err = l.e.rdb.Publish(t.Context(), l.channel, "sentinel").Err()
	} else {
		err = l.e.rdb.SPublish(t.Context(), l.channel, "sentinel").Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := l.next(t); got != "sentinel" {
		t.Fatalf("after %s: message %q, want no notice", after, got)
	}
}

// Exclusive and shared holds on the server: a downgrade keeps both in the holder's field
// ("<w>:<r>"); its last exclusive release passes the key to shared mode with a notice, the
// lease unchanged; readers share the key, and the last one's release deletes it. Inspect
// reports each state.
func TestKindsDowngradeToShared(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:down"
		l := e.listen(t, k)
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Fresh: true}); a.Holds != 1 {
			t.Fatalf("Acquire = %+v", a)
		}
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "W": "1"})
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Reentry: true}); a.Holds != 2 {
			t.Fatalf("re-entry = %+v, want 2 holds", a)
		}
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "W": "2"})
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Reentry: true, Shared: true}); a.Holds != 3 {
			t.Fatalf("downgrade = %+v, want 3 holds", a)
		}
		e.wantHash(t, k, map[string]string{"": "locker:quiet", "W": "2:1"})
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R", Shared: true}); a.Holds != 0 || a.TTL <= 0 {
			t.Fatalf("a reader's Acquire while W holds = %+v, want refused with W's lease", a)
		}
		if st := e.inspect(t, k); !st.Locked || st.Shared || st.Owner != "W" || st.Holds != 3 || st.Readers != 0 || st.Queued != 0 || st.TTL <= 0 {
			t.Fatalf("Inspect = %+v, want W exclusive with 3 holds", st)
		}
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Reentry: true}); a.Holds != 4 {
			t.Fatalf("exclusive re-entry of a downgraded holder = %+v, want 4", a)
		}
		e.wantHash(t, k, map[string]string{"": "locker", "W": "3:1"})

		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 3)
		e.wantHash(t, k, map[string]string{"": "locker", "W": "2:1"})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 2)
		e.wantHash(t, k, map[string]string{"": "locker", "W": "1:1"})
		l.none(t, "releases that leave exclusive holds")
		if e.m != nil { // a frozen clock: the lease must be exactly what it was
			before := e.pttl(t, k)
			e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 1)
			if after := e.pttl(t, k); after != before {
				t.Fatalf("passage to shared mode changed the lease from %v to %v", before, after)
			}
		} else {
			e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 1)
		}
		e.wantHash(t, k, map[string]string{"": "locker:shared", "W": "1"})
		l.notice(t, k, "the passage to shared mode")
		if _, err := e.b.Release(t.Context(), locker.ReleaseRequest{Key: k, Owner: "W"}); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("exclusive Release by a reader = %v, want ErrNotHeld", err)
		}
		if st := e.inspect(t, k); !st.Locked || !st.Shared || st.Owner != "W" || st.Holds != 1 || st.Readers != 1 {
			t.Fatalf("Inspect = %+v, want W reading alone", st)
		}

		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R", Shared: true, Fresh: true}); a.Holds != 1 {
			t.Fatalf("a new reader = %+v", a)
		}
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R", Shared: true, Reentry: true}); a.Holds != 2 {
			t.Fatalf("a reader's re-entry = %+v", a)
		}
		e.wantHash(t, k, map[string]string{"": "locker:shared", "W": "1", "R": "2"})
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "X"}); a.Holds != 0 || a.TTL <= 0 {
			t.Fatalf("a writer while readers hold = %+v, want refused with their lease", a)
		}
		if st := e.inspect(t, k); !st.Shared || st.Holds != 3 || st.Readers != 2 || (st.Owner != "W" && st.Owner != "R") {
			t.Fatalf("Inspect = %+v, want 2 readers with 3 holds", st)
		}
		if renewed := e.b.Renew(t.Context(), []locker.Renewal{{Key: k, Owner: "R", TTL: time.Minute}, {Key: k, Owner: "X", TTL: time.Minute}}); renewed[0] != nil || !errors.Is(renewed[1], locker.ErrNotHeld) {
			t.Fatalf("Renew = %v, want the reader renewed and no other owner", renewed)
		}
		if d := e.pttl(t, k); d <= 10*time.Second {
			t.Fatalf("PTTL after a reader's renewal = %v, want about a minute", d)
		}

		e.release(t, locker.ReleaseRequest{Key: k, Owner: "R", Shared: true}, 1)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W", Shared: true}, 0)
		e.wantHash(t, k, map[string]string{"": "locker:shared", "R": "1"})
		l.none(t, "a reader that leaves others")
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "R", Shared: true}, 0)
		e.wantHash(t, k, map[string]string{})
		l.notice(t, k, "the last reader's release")
		if st := e.inspect(t, k); st.Locked || st.Queued != 0 || st.Holders != nil {
			t.Fatalf("Inspect of a free key = %+v", st)
		}
	})
}

// A downgraded holder may release its shared holds first; a shared release by an exclusive
// holder without any is refused; ForceRelease deletes a lock in shared mode.
func TestKindsSharedReleaseOfExclusive(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:sx"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W"})
		if _, err := e.b.Release(t.Context(), locker.ReleaseRequest{Key: k, Owner: "W", Shared: true}); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("shared Release of an exclusive holder without shared holds = %v, want ErrNotHeld", err)
		}
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Shared: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Shared: true})
		e.wantHash(t, k, map[string]string{"": "locker", "W": "1:2"})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W", Shared: true}, 2)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W", Shared: true}, 1)
		e.wantHash(t, k, map[string]string{"": "locker", "W": "1"})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 0)
		e.wantHash(t, k, map[string]string{})

		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R1", Shared: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R2", Shared: true})
		l := e.listen(t, k)
		if ok, err := e.b.ForceRelease(t.Context(), k); !ok || err != nil {
			t.Fatalf("ForceRelease of a shared lock = %v, %v", ok, err)
		}
		e.wantHash(t, k, map[string]string{})
		l.notice(t, k, "ForceRelease")
	})
}

// An exclusive request of a reader is refused with ErrUpgrade, whatever its flags, and changes
// nothing: not the lock, its lease, a marker, the queue or the fencing counter.
func TestKindsUpgradeRefused(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:up"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R", Shared: true, Fresh: true, TTL: time.Hour})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R2", Shared: true, TTL: time.Hour})
		before := e.hash(t, k)
		for _, req := range []locker.AcquireRequest{
			{Key: k, Owner: "R", Reentry: true},
			{Key: k, Owner: "R"},
			{Key: k, Owner: "R", ID: "up-1", Fence: true},
			{Key: k, Owner: "R", Fair: true, Wait: time.Minute, ID: "up-2"},
			{Key: k, Owner: "R", Wait: time.Minute},
		} {
			req.TTL = time.Minute
			a, err := e.b.Acquire(t.Context(), req)
			if !errors.Is(err, locker.ErrUpgrade) || a != (locker.Acquisition{}) {
				t.Fatalf("Acquire %+v by a reader = %+v, %v; want ErrUpgrade", req, a, err)
			}
		}
		if after := e.hash(t, k); !maps.Equal(after, before) {
			t.Fatalf("%s = %v after the refused upgrades, want %v", k, after, before)
		}
		if d := e.pttl(t, k); d <= time.Minute {
			t.Fatalf("lease %v after the refused upgrades, want the hour it had", d)
		}
		keys, err := e.rdb.Keys(t.Context(), "*").Result()
		if err != nil || len(keys) != 1 || keys[0] != k {
			t.Fatalf("keys after the refused upgrades = %q, %v; want only the lock", keys, err)
		}
	})
}

// A waiting writer that is not fair (kind 'w') makes new readers wait behind it, not those that
// hold the key; its entry ends Wait after it was last refreshed, and then readers come in again.
func TestKindsWriterPreferenceExpires(t *testing.T) {
	e := onMiniredis(t)
	const k = "{kinds}:wp"
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R1", Shared: true, TTL: time.Hour})
	a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Wait: time.Second})
	if a.Holds != 0 || a.TTL != time.Hour {
		t.Fatalf("a writer while a reader holds = %+v, want refused with the hour's lease", a)
	}
	if got, counter := e.entries(t, k); !maps.Equal(got, map[string]string{"W": "1:w"}) || counter != "1" {
		t.Fatalf("queue = %v, counter %q; want W's entry 1:w", got, counter)
	}
	if d := e.deadline(t, k, "W"); !d.Equal(e.now.Add(time.Second)) {
		t.Fatalf("W's deadline %v, want %v", d, e.now.Add(time.Second))
	}
	if d := e.pttl(t, rediscore.QueueKey(k)); d != time.Second {
		t.Fatalf("the queue's PTTL = %v, want its latest deadline, 1s away", d)
	}
	if st := e.inspect(t, k); !st.Shared || st.Readers != 1 || st.Queued != 1 {
		t.Fatalf("Inspect = %+v, want one reader and one entry", st)
	}
	for _, fair := range []bool{false, true} {
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R2", Shared: true, Fair: fair, Wait: time.Minute}); a.Holds != 0 || a.TTL != time.Hour {
			t.Fatalf("a new reader (fair %v) behind a waiting writer = %+v, want refused", fair, a)
		}
	}
	// The plain reader queued behind W (kind 'r'); the fair one, the same owner, kept its place.
	if got, _ := e.entries(t, k); !maps.Equal(got, map[string]string{"W": "1:w", "R2": "2:r"}) {
		t.Fatalf("queue = %v, want W then R2", got)
	}
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R1", Shared: true, Reentry: true}); a.Holds != 2 {
		t.Fatalf("a holding reader's re-entry = %+v, want granted whatever the queue", a)
	}

	// W asks again 800ms later: it keeps its place, with a new deadline.
	e.advance(800 * time.Millisecond)
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Wait: time.Second})
	if got, counter := e.entries(t, k); !maps.Equal(got, map[string]string{"W": "1:w", "R2": "2:r"}) || counter != "2" {
		t.Fatalf("queue after W's refresh = %v, counter %q; want W's place kept", got, counter)
	}
	if d := e.deadline(t, k, "W"); !d.Equal(e.now.Add(time.Second)) {
		t.Fatalf("W's refreshed deadline %v, want %v", d, e.now.Add(time.Second))
	}
	e.advance(999 * time.Millisecond)
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R3", Shared: true}); a.Holds != 0 {
		t.Fatalf("a new reader 1ms before W's entry ends = %+v, want refused", a)
	}
	e.advance(time.Millisecond) // W died: its entry ends
	if st := e.inspect(t, k); st.Queued != 1 {
		t.Fatalf("Inspect = %+v, want only R2's entry live", st)
	}
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R3", Shared: true}); a.Holds != 1 {
		t.Fatalf("a new reader once W's entry ended = %+v, want granted", a)
	}
	// R2, fair, comes in too and leaves the queue, which prunes W's dead entry and vanishes.
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R2", Shared: true, Fair: true, Wait: time.Minute}); a.Holds != 1 {
		t.Fatalf("the fair reader once W's entry ended = %+v, want granted", a)
	}
	if n, _ := e.rdb.Exists(t.Context(), rediscore.QueueKey(k)).Result(); n != 0 {
		t.Fatalf("queue %v still exists", e.hash(t, rediscore.QueueKey(k)))
	}

	// A queue of dead entries alone vanishes by itself.
	const k2 = "{kinds}:wp2"
	e.acquire(t, locker.AcquireRequest{Key: k2, Owner: "R", Shared: true, TTL: time.Hour})
	e.acquire(t, locker.AcquireRequest{Key: k2, Owner: "W1", Wait: time.Second})
	e.acquire(t, locker.AcquireRequest{Key: k2, Owner: "W2", Wait: 3 * time.Second})
	if d := e.pttl(t, rediscore.QueueKey(k2)); d != 3*time.Second {
		t.Fatalf("the queue's PTTL = %v, want its latest deadline, 3s away", d)
	}
	e.advance(3 * time.Second)
	if n, _ := e.rdb.Exists(t.Context(), rediscore.QueueKey(k2)).Result(); n != 0 {
		t.Fatalf("a queue of dead entries still exists: %v", e.hash(t, rediscore.QueueKey(k2)))
	}
}

// A waiting writer gets the key once the readers are gone, and leaves the queue; readers that
// arrive meanwhile wait for it.
func TestKindsWriterPreferenceHandOff(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:ho"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R1", Shared: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Wait: time.Minute, Fresh: true})
		l := e.listen(t, k)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "R1", Shared: true}, 0)
		l.notice(t, k, "the last reader's release")
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R2", Shared: true}); a.Holds != 0 || a.TTL != 0 {
			t.Fatalf("a new reader on a free key with a waiting writer = %+v, want refused with TTL 0", a)
		}
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Wait: time.Minute, Fresh: true}); a.Holds != 1 {
			t.Fatalf("the waiting writer on the free key = %+v, want granted", a)
		}
		if n, _ := e.rdb.Exists(t.Context(), rediscore.QueueKey(k)).Result(); n != 0 {
			t.Fatalf("queue %v after the writer's grant, want none", e.hash(t, rediscore.QueueKey(k)))
		}
		l.none(t, "an exclusive grant")
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Wait: time.Minute, Fresh: true}); a.Holds != 1 {
			t.Fatalf("the writer's request sent again = %+v, want its first outcome", a)
		}
	})
}

// A grant's record ends with its owner's last release: the Client never confirms a grant with a
// call of its own, and the queue is gone once nobody waits.
func TestKindsGrantRecordEndsWithRelease(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:gr"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", Fresh: true})
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Wait: time.Minute, Fresh: true, Grant: 2 * time.Second, ID: "b1"}); a.Holds != 0 {
			t.Fatalf("B behind A = %+v, want refused", a)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "A", Fresh: true}, 0)
		if st, err := e.b.Inspect(t.Context(), k); err != nil || st.Owner != "B" {
			t.Fatalf("after A's release: %+v, %v; want B granted", st, err)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "B", Fresh: true}, 0)
		if n, _ := e.rdb.Exists(t.Context(), k, rediscore.QueueKey(k)).Result(); n != 0 {
			t.Fatalf("after B's release: %d of the lock and its queue left (%v), want none", n, e.hash(t, rediscore.QueueKey(k)))
		}
	})
}

// Fair requests are granted in the order they first asked; an entry whose waiter died stops
// blocking those behind it at its deadline; a fair request without a wait never queues nor jumps
// the queue; granting a fair reader wakes the readers now at the head.
func TestKindsFairOrder(t *testing.T) {
	e := onMiniredis(t)
	const k = "{kinds}:fair"
	e.acquire(t, locker.AcquireRequest{Key: k, Owner: "H", TTL: time.Hour})
	for _, req := range []locker.AcquireRequest{
		{Key: k, Owner: "A", Fair: true, Wait: time.Second},
		{Key: k, Owner: "B", Fair: true, Wait: 5 * time.Second},
		{Key: k, Owner: "C", Fair: true, Shared: true, Wait: 5 * time.Second},
		{Key: k, Owner: "D", Fair: true, Shared: true, Wait: 5 * time.Second},
		{Key: k, Owner: "T", Fair: true}, // no wait: never queued
	} {
		if a := e.acquire(t, req); a.Holds != 0 || a.TTL != time.Hour {
			t.Fatalf("%s while H holds = %+v, want refused", req.Owner, a)
		}
	}
	if got, counter := e.entries(t, k); !maps.Equal(got, map[string]string{"A": "1:x", "B": "2:x", "C": "3:s", "D": "4:s"}) || counter != "4" {
		t.Fatalf("queue = %v, counter %q", got, counter)
	}
	if st := e.inspect(t, k); st.Queued != 4 || st.Owner != "H" {
		t.Fatalf("Inspect = %+v, want H with 4 queued", st)
	}
	l := e.listen(t, k)
	e.release(t, locker.ReleaseRequest{Key: k, Owner: "H"}, 0)
	l.notice(t, k, "H's release")
	for _, req := range []locker.AcquireRequest{
		{Key: k, Owner: "B", Fair: true, Wait: 5 * time.Second},
		{Key: k, Owner: "C", Fair: true, Shared: true, Wait: 5 * time.Second},
		{Key: k, Owner: "T", Fair: true},
		{Key: k, Owner: "T", Fair: true, Shared: true},
	} {
		if a := e.acquire(t, req); a.Holds != 0 || a.TTL != 0 {
			t.Fatalf("%s (shared %v) behind A = %+v, want refused with TTL 0", req.Owner, req.Shared, a)
		}
	}
	if st := e.inspect(t, k); st.Locked || st.Queued != 4 {
		t.Fatalf("Inspect = %+v, want free with 4 queued", st)
	}
	e.advance(time.Second) // A died: its entry ends
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "C", Fair: true, Shared: true, Wait: 5 * time.Second}); a.Holds != 0 {
		t.Fatalf("reader C behind writer B = %+v, want refused", a)
	}
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Fair: true, Wait: 5 * time.Second, Fence: true}); a.Holds != 1 || a.Token == 0 {
		t.Fatalf("B at the head once A's entry ended = %+v, want granted with a token", a)
	}
	token := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Reentry: true, Fence: true}).Token
	if got, _ := e.entries(t, k); !maps.Equal(got, map[string]string{"C": "3:s", "D": "4:s"}) {
		t.Fatalf("queue after B's grant = %v, want C, D (A pruned)", got)
	}
	l.none(t, "an exclusive grant")
	e.release(t, locker.ReleaseRequest{Key: k, Owner: "B"}, 1)
	e.release(t, locker.ReleaseRequest{Key: k, Owner: "B"}, 0)
	l.notice(t, k, "B's release")
	a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "C", Fair: true, Shared: true, Wait: 5 * time.Second, Fence: true})
	if a.Holds != 1 || a.Token != token {
		t.Fatalf("reader C at the head = %+v, want granted with the latest token %d", a, token)
	}
	l.notice(t, k, "the grant of a reader with a reader behind it")
	if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "D", Fair: true, Shared: true, Wait: 5 * time.Second}); a.Holds != 1 {
		t.Fatalf("reader D behind reader C = %+v, want granted", a)
	}
	l.none(t, "the grant of the last entry")
	if n, _ := e.rdb.Exists(t.Context(), rediscore.QueueKey(k)).Result(); n != 0 {
		t.Fatalf("queue %v after the last grant, want none", e.hash(t, rediscore.QueueKey(k)))
	}
	if st := e.inspect(t, k); !st.Shared || st.Readers != 2 || st.Owner != "C" || st.Queued != 0 {
		t.Fatalf("Inspect = %+v, want readers C and D", st)
	}
}

// A waiter that gives up leaves the queue (Dequeue): those behind it are woken; a missing entry
// is no error and sends nothing; the queue goes once empty.
func TestKindsDequeue(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:dq"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "H"})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", Fair: true, Wait: time.Minute})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Fair: true, Wait: time.Minute})
		l := e.listen(t, k)
		if err := e.b.Dequeue(t.Context(), k, "nobody"); err != nil {
			t.Fatalf("Dequeue of a missing entry = %v", err)
		}
		l.none(t, "the Dequeue of a missing entry")
		if err := e.b.Dequeue(t.Context(), k, "A"); err != nil {
			t.Fatal(err)
		}
		l.notice(t, k, "the Dequeue of the head")
		if got, _ := e.entries(t, k); !maps.Equal(got, map[string]string{"B": "2:x"}) {
			t.Fatalf("queue = %v, want B", got)
		}
		if err := e.b.Dequeue(t.Context(), k, "B"); err != nil {
			t.Fatal(err)
		}
		l.none(t, "the Dequeue of the last entry")
		if n, _ := e.rdb.Exists(t.Context(), rediscore.QueueKey(k)).Result(); n != 0 {
			t.Fatalf("queue %v after the last Dequeue, want none", e.hash(t, rediscore.QueueKey(k)))
		}
		if st := e.inspect(t, k); st.Queued != 0 || st.Owner != "H" {
			t.Fatalf("Inspect = %+v", st)
		}
	})
}

// A wait queue key that holds anything but a queue is left as it is: every call that needs it
// fails with ErrNotALock and writes nothing (not the lock, nor a marker); a plain exclusive
// request, which does not read the queue, works.
func TestKindsQueueNotALock(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		for i, setup := range [][]string{
			{"SET", "v"},
			{"RPUSH", "a", "b"},
			{"HSET", "f", "1"},                          // a hash without the counter
			{"HSET", "", "x"},                           // a counter that is not a number
			{"HSET", "", "3", "o", "1:y:1000"},          // an entry that is not one
			{"HSET", "", "3", "o", "1:x:1000:p2:500:i"}, // a writer's entry asking for a permit
			{"HSET", "", "3", "o", "1:r:1000:p2:"},      // a permit asked for without a lease
			{"HSET", "", "3", "o", "1:s:1000:p0:500:i"}, // a permit of a semaphore of 0
		} {
			k := fmt.Sprintf("{kinds}:nq%d", i)
			q := rediscore.QueueKey(k)
			if err := e.rdb.Do(t.Context(), append([]any{setup[0], q}, anys(setup[1:])...)...).Err(); err != nil {
				t.Fatal(err)
			}
			e.acquire(t, locker.AcquireRequest{Key: k, Owner: "H", TTL: time.Hour})
			dump := func() string {
				typ := e.rdb.Type(t.Context(), q).Val()
				var v any
				switch typ {
				case "string":
					v = e.rdb.Get(t.Context(), q).Val()
				case "list":
					v = e.rdb.LRange(t.Context(), q, 0, -1).Val()
				case "hash":
					v = e.hash(t, q)
				}
				return fmt.Sprint(typ, v, e.pttl(t, q))
			}
			before, lock := dump(), e.hash(t, k)
			for _, req := range []locker.AcquireRequest{
				{Key: k, Owner: "O", Shared: true},
				{Key: k, Owner: "O", Fair: true, ID: "r1"},
				{Key: k, Owner: "O", Wait: time.Second, ID: "r2"},
				{Key: k, Owner: "H", Shared: true, Reentry: true, ID: "r3"},
			} {
				req.TTL = time.Minute
				if _, err := e.b.Acquire(t.Context(), req); !errors.Is(err, locker.ErrNotALock) {
					t.Fatalf("%v: Acquire %+v = %v, want ErrNotALock", setup, req, err)
				}
			}
			if _, err := e.b.Inspect(t.Context(), k); !errors.Is(err, locker.ErrNotALock) {
				t.Fatalf("%v: Inspect = %v, want ErrNotALock", setup, err)
			}
			if err := e.b.Dequeue(t.Context(), k, "O"); !errors.Is(err, locker.ErrNotALock) {
				t.Fatalf("%v: Dequeue = %v, want ErrNotALock", setup, err)
			}
			if dump() != before {
				t.Fatalf("%v: the queue key changed", setup)
			}
			e.wantHash(t, k, lock)
			if d := e.pttl(t, k); d <= time.Minute {
				t.Fatalf("%v: the lock's lease changed to %v", setup, d)
			}
			if n, _ := e.rdb.Exists(t.Context(), rediscore.MarkerKey(k, "r1"), rediscore.MarkerKey(k, "r2"), rediscore.MarkerKey(k, "r3")).Result(); n != 0 {
				t.Fatalf("%v: a marker was written", setup)
			}
			if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "H", Reentry: true}); a.Holds != 2 {
				t.Fatalf("%v: a plain re-entry = %+v, want granted", setup, a)
			}
		}
	})
}

// Request IDs and take-backs work for shared holds: an acquire sent again reports its first
// outcome, a release sent again removes one hold only; a take-back removes the shared hold its
// acquire added, or, for a fresh owner, every hold.
func TestKindsSharedRequestIDs(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:id"
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", ID: "a1"})
		for range 2 {
			if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", ID: "a2", Shared: true, Reentry: true}); a.Holds != 2 {
				t.Fatalf("a downgrade sent twice = %+v, want 2 holds", a)
			}
		}
		e.wantHash(t, k, map[string]string{"": "locker", "W": "1:1"})
		for range 2 {
			e.release(t, locker.ReleaseRequest{Key: k, Owner: "W", ID: "r1", Shared: true}, 1)
		}
		e.wantHash(t, k, map[string]string{"": "locker", "W": "1"})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", ID: "a3", Shared: true, Reentry: true})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W", ID: "a3", Undo: true, Shared: true}, 1)
		e.wantHash(t, k, map[string]string{"": "locker", "W": "1"})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 0)

		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R1", Shared: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "F", ID: "f1", Fresh: true, Shared: true})
		e.acquire(t, locker.AcquireRequest{Key: k, Owner: "F", ID: "f2", Shared: true, Reentry: true})
		e.wantHash(t, k, map[string]string{"": "locker:shared", "R1": "1", "F": "2"})
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "F", ID: "f1", Undo: true, Fresh: true, Shared: true}, 0)
		e.wantHash(t, k, map[string]string{"": "locker:shared", "R1": "1"})
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "F", ID: "f1", Fresh: true, Shared: true}); a.Holds != 0 {
			t.Fatalf("an acquire taken back, arriving late = %+v, want refused", a)
		}
	})
}

// A fenced shared hold reports the latest token and never advances it; a new writer does.
func TestKindsSharedFence(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		const k = "{kinds}:fence"
		if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R", Shared: true, Fence: true}); a.Holds != 1 || a.Token != 0 {
			t.Fatalf("a fenced reader before any writer = %+v, want token 0", a)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "R", Shared: true}, 0)
		w := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Fence: true})
		d := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W", Shared: true, Fence: true})
		if d.Token != w.Token || w.Token == 0 {
			t.Fatalf("downgrade token %d, writer's %d: want the same", d.Token, w.Token)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W"}, 1)
		r := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "R", Shared: true, Fence: true})
		if r.Token != w.Token {
			t.Fatalf("reader's token %d, want the latest %d", r.Token, w.Token)
		}
		if got := e.rdb.Get(t.Context(), rediscore.FenceKey(k)).Val(); got != fmt.Sprint(w.Token) {
			t.Fatalf("counter %s, want %d", got, w.Token)
		}
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "R", Shared: true}, 0)
		e.release(t, locker.ReleaseRequest{Key: k, Owner: "W", Shared: true}, 0)
		if w2 := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "W2", Fence: true}); w2.Token <= w.Token {
			t.Fatalf("next writer's token %d, want more than %d", w2.Token, w.Token)
		}
	})
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
