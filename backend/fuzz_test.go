package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// sentinelKey is a plain Redis string set before every fuzz input: no script may touch it.
const sentinelKey = "locker:fuzz:sentinel"

// The memory backend and the go-redis backend on miniredis agree on every result of the same
// operations with the same keys, owners, request IDs and TTLs, whatever their bytes: keys, owners
// and IDs reach Redis only as KEYS and ARGV, never as script text.
//
// An op byte picks the operation (op%5), the owner (op/5%2), the request ID (op/10%3: none, id,
// or id+"#2", so that calls are sent again) and, for acquires, fencing, for releases, a take-back
// (op/30%2).
func FuzzBackendsAgree(f *testing.F) {
	f.Add("k", "owner", "id", uint16(1000), []byte{0, 0, 1, 1, 2, 3, 4})
	f.Add("'); redis.call('flushall') --", "'); redis.call('flushall') --", "')--", uint16(5), []byte{0, 5, 0, 3, 1, 6, 2, 1, 3, 4, 3})
	f.Add("]]..KEYS[1]..[[", "]]..ARGV[1]..[[", "]]..KEYS[2]..[[", uint16(9999), []byte{0, 0, 5, 2, 3, 1, 1, 6, 4})
	f.Add("lock", "\"); redis.call('del', '"+sentinelKey+"') --", "x", uint16(77), []byte{0, 2, 1, 0, 5, 1})
	f.Add("{tag}", "{}", "{id}", uint16(1), []byte{0, 5, 5, 6, 1, 3, 4, 0, 1})
	f.Add("}{", "{owner}", "}", uint16(300), []byte{5, 0, 6, 1, 8, 2})
	f.Add("\x00\xff\xfe", "\x00", "\xff", uint16(65535), []byte{0, 0, 0, 3, 1, 1, 1, 1})
	f.Add("\xc3(", "\xed\xa0\x80", "", uint16(42), []byte{5, 0, 9, 2, 8, 4, 3})
	// Sent again, taken back, fenced: acquire with id twice, release with id twice, take back.
	f.Add("job", "o", "r", uint16(10), []byte{10, 10, 30, 40, 11, 11, 21, 41, 71, 3})
	f.Add("a{b", "o", "r", uint16(10), []byte{40, 40, 70, 1, 10, 41, 41, 3})
	// Companions of stray braces and of a long key, and an ID that their names cannot hold as it is.
	f.Add("x{}y", "o", "r{1}:locker:fence", uint16(10), []byte{40, 40, 70, 1, 10, 41, 41, 3})
	f.Add("}x", "o", "r", uint16(10), []byte{10, 30, 11, 1, 41, 3})
	f.Add(strings.Repeat("{k", 100), "o", strings.Repeat("r", 100), uint16(10), []byte{40, 40, 70, 1, 10, 41, 41, 3})

	m := redistest.Miniredis(f)
	if err := m.Start(); err != nil {
		f.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	f.Cleanup(func() { rdb.Close() })
	red := goredis.New(rdb)

	f.Fuzz(func(t *testing.T, key, owner, id string, ttlMs uint16, ops []byte) {
		if key == "" || owner == "" || len(key) > 1<<10 || len(owner) > locker.MaxOwnerLen || key == sentinelKey {
			t.Skip("the Client refuses such inputs")
		}
		if len(ops) > 64 {
			ops = ops[:64]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.FlushAll()
		if err := rdb.Set(ctx, sentinelKey, "intact", 0).Err(); err != nil {
			t.Fatal(err)
		}
		mem := memory.New()
		// Leases of 10 to about 75 seconds: nothing expires while one input runs.
		ttl := 10*time.Second + time.Duration(ttlMs)*time.Millisecond
		owners := [2]string{owner, owner + "#2"}
		ids := [3]string{"", id, id + "#2"}
		var latest [2]uint64 // the latest fencing token of memory and of Redis
		names := [2]string{"memory", "redis"}
		granted := make(map[string]bool) // IDs of granted acquires: sent again, they report the first
		resentAcquire := func(req locker.AcquireRequest, a locker.Acquisition) bool {
			if req.ID == "" || !a.Acquired() {
				return false
			}
			if granted[req.ID] {
				return true
			}
			granted[req.ID] = true
			return false
		}

		for i, op := range ops {
			o, rid, flag := owners[op/5%2], ids[op/10%3], op/30%2 == 1
			switch op % 5 {
			case 0:
				req := locker.AcquireRequest{Key: key, Owner: o, TTL: ttl, ID: rid, Fence: flag}
				a, errA := mem.Acquire(ctx, req)
				b, errB := red.Acquire(ctx, req)
				if errA != nil || errB != nil {
					t.Fatalf("op %d Acquire(%+v): memory %v, redis %v", i, req, errA, errB)
				}
				if a.Holds != b.Holds || (a.Token == 0) != (b.Token == 0) {
					t.Fatalf("op %d Acquire(%+v): memory %+v, redis %+v", i, req, a, b)
				}
				// Tokens differ (Redis seeds its counter from its clock), but on both a new lock's
				// exceeds the latest and a re-entry's is the latest.
				fresh := a.Holds == 1 && !resentAcquire(req, a)
				for j, got := range []locker.Acquisition{a, b} {
					switch {
					case got.Token == 0:
					case fresh && got.Token <= latest[j]:
						t.Fatalf("op %d Acquire(%+v): %s token %d, want above %d", i, req, names[j], got.Token, latest[j])
					case fresh:
						latest[j] = got.Token
					case got.Token != latest[j]:
						t.Fatalf("op %d Acquire(%+v): %s token %d, want the latest, %d", i, req, names[j], got.Token, latest[j])
					}
				}
				// A call sent again whose hold is gone, or one taken back, is refused with TTL 0.
				resent := rid != "" && a.TTL == 0 && b.TTL == 0
				if a.Holds == 0 && !resent && (a.TTL <= 0 || b.TTL <= 0 || a.TTL > ttl+time.Millisecond || b.TTL > ttl+time.Millisecond) {
					t.Fatalf("op %d Acquire(%q) refused: memory TTL %v, redis TTL %v, want both in (0, %v]", i, o, a.TTL, b.TTL, ttl)
				}
			case 1:
				req := locker.ReleaseRequest{Key: key, Owner: o, ID: rid, Undo: flag && rid != ""}
				a, errA := mem.Release(ctx, req)
				b, errB := red.Release(ctx, req)
				if notHeld(errA) != notHeld(errB) || (errA == nil) != (errB == nil) {
					t.Fatalf("op %d Release(%q): memory %d, %v; redis %d, %v", i, o, a, errA, b, errB)
				}
				if errA != nil && !notHeld(errA) {
					t.Fatalf("op %d Release(%q): memory %v, redis %v", i, o, errA, errB)
				}
				if a != b {
					t.Fatalf("op %d Release(%q): memory %d left, redis %d left", i, o, a, b)
				}
			case 2:
				batch := []locker.Renewal{{Key: key, Owner: o, TTL: ttl}, {Key: key, Owner: owners[1-op/5%2], TTL: ttl}}
				errsA, errsB := mem.Renew(ctx, batch), red.Renew(ctx, batch)
				if len(errsA) != len(batch) || len(errsB) != len(batch) {
					t.Fatalf("op %d Renew: %d and %d results for %d entries", i, len(errsA), len(errsB), len(batch))
				}
				for j := range batch {
					ea, eb := errsA[j], errsB[j]
					if (ea != nil && !notHeld(ea)) || (eb != nil && !notHeld(eb)) || (ea == nil) != (eb == nil) {
						t.Fatalf("op %d Renew entry %d (%q): memory %v, redis %v", i, j, batch[j].Owner, ea, eb)
					}
				}
			case 3:
				compareInspect(ctx, t, mem, red, key, ttl, i)
			case 4:
				a, errA := mem.ForceRelease(ctx, key)
				b, errB := red.ForceRelease(ctx, key)
				if errA != nil || errB != nil || a != b {
					t.Fatalf("op %d ForceRelease: memory %v, %v; redis %v, %v", i, a, errA, b, errB)
				}
			}
		}
		st := compareInspect(ctx, t, mem, red, key, ttl, len(ops))

		// Nothing but the lock (while held), its companions (request markers, the fencing
		// counter) and the sentinel is on the server, and the sentinel is untouched.
		if v, err := rdb.Get(ctx, sentinelKey).Result(); err != nil || v != "intact" {
			t.Fatalf("sentinel key after the sequence: %q, %v; want \"intact\"", v, err)
		}
		allowed := map[string]bool{sentinelKey: true, rediscore.FenceKey(key): true}
		for _, rid := range ids[1:] {
			allowed[rediscore.MarkerKey(key, rid)] = true
		}
		if st.Locked {
			allowed[key] = true
		}
		for _, k := range m.Keys() {
			if !allowed[k] {
				t.Fatalf("key %q on the server after the sequence; want only the sentinel, the lock %q and its companions", k, key)
			}
		}
		if st.Locked {
			fields, err := rdb.HGetAll(ctx, key).Result()
			if err != nil || len(fields) != 2 || fields[""] != "locker" {
				t.Fatalf("lock hash %q = %q, %v; want exactly one owner and the lock marker", key, fields, err)
			}
		}
	})
}

// compareInspect checks that both backends report the same state of key, and returns it.
func compareInspect(ctx context.Context, t *testing.T, mem, red locker.Locker, key string, ttl time.Duration, op int) locker.State {
	t.Helper()
	a, errA := mem.Inspect(ctx, key)
	b, errB := red.Inspect(ctx, key)
	if errA != nil || errB != nil {
		t.Fatalf("op %d Inspect: memory %v, redis %v", op, errA, errB)
	}
	if a.Locked != b.Locked || a.Holds != b.Holds || a.Owner != b.Owner {
		t.Fatalf("op %d Inspect: memory %+v, redis %+v", op, a, b)
	}
	if a.Locked && (a.TTL <= 0 || b.TTL <= 0 || a.TTL > ttl+time.Millisecond || b.TTL > ttl+time.Millisecond) {
		t.Fatalf("op %d Inspect: memory TTL %v, redis TTL %v, want both in (0, %v]", op, a.TTL, b.TTL, ttl)
	}
	// The holders, whatever the bytes of their tokens.
	if len(a.Holders) != len(b.Holders) || a.Limit != b.Limit {
		t.Fatalf("op %d Inspect: memory %+v, redis %+v", op, a, b)
	}
	for j, h := range b.Holders {
		if h.Owner != a.Holders[j].Owner || h.Holds != a.Holders[j].Holds || h.TTL <= 0 || h.TTL > ttl+time.Millisecond {
			t.Fatalf("op %d Inspect: memory holders %+v, redis %+v", op, a.Holders, b.Holders)
		}
	}
	return a
}

func notHeld(err error) bool { return errors.Is(err, locker.ErrNotHeld) }
