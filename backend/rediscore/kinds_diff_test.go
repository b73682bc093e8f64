package rediscore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// TestKindsLikeMemory drives the same random sequence of calls (Acquire of both kinds and of
// semaphores' permits, fair or not, waiting or not, with IDs sent again and taken back,
// Release, Renew, Inspect, ForceRelease, Dequeue, HandOff, steps of time) against
// backend/memory and against rediscore on miniredis in one synctest bubble, and checks that
// every answer is the same (fencing tokens only as zero, or as the same draw of the key's:
// each backend's tokens of a key pair up one to one, in the same order; remaining leases within
// a millisecond). Time moves in whole milliseconds, so that deadlines on the server's clock in
// milliseconds are exact.
func TestKindsLikeMemory(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, kindsLikeMemory)
	})
}

// diffAcquire is an Acquire with an ID, to send again or take back.
type diffAcquire struct {
	req   locker.AcquireRequest
	stale bool // Fresh, and its owner took holds after it: a take-back would be ambiguous
}

func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, locker.ErrNotHeld):
		return "ErrNotHeld"
	case errors.Is(err, locker.ErrUpgrade):
		return "ErrUpgrade"
	case errors.Is(err, locker.ErrLimitMismatch):
		return "ErrLimitMismatch"
	}
	return "error " + err.Error()
}

func near(a, b time.Duration) bool {
	d := a - b
	return d <= time.Millisecond && d >= -time.Millisecond
}

func kindsLikeMemory(rt *rapid.T) {
	m := redistest.Miniredis(rt)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0", Dialer: func(context.Context, string, string) (net.Conn, error) { return m.Dial() }})
	rt.Cleanup(func() { rdb.Close() })
	var (
		mem      locker.HandOffer = memory.New()
		red      locker.HandOffer = goredis.New(rdb)
		ctx                       = context.Background()
		unit                      = 50 * time.Millisecond
		keys                      = []string{"k0", "k1"}[:rapid.IntRange(1, 2).Draw(rt, "keys")]
		owners                    = []string{"o0", "o1", "o2"}[:rapid.IntRange(2, 3).Draw(rt, "owners")]
		limits                    = map[string]int{} // each key's limit, which most permit requests ask for
		ids      []*diffAcquire
		nextID   int
		tokens   = map[string]*tokenPairs{} // by key
		everHeld = map[[2]string]bool{}
	)
	for _, k := range keys {
		limits[k], tokens[k] = rapid.IntRange(1, 3).Draw(rt, "limit"), &tokenPairs{}
	}
	drawKey := func(t *rapid.T) string { return rapid.SampledFrom(keys).Draw(t, "key") }
	drawOwner := func(t *rapid.T) string { return rapid.SampledFrom(owners).Draw(t, "owner") }
	newID := func(t *rapid.T) string {
		if !rapid.Bool().Draw(t, "with ID") {
			return ""
		}
		nextID++
		return fmt.Sprintf("id-%d", nextID)
	}
	// ends are the ends of the leases the calls set, by (key, owner): Advance steps over them (see
	// stepOverEnds).
	ends := map[[2]string]time.Time{}
	acquire := func(t *rapid.T, req locker.AcquireRequest, what string) {
		am, errm := mem.Acquire(ctx, req)
		ar, errr := red.Acquire(ctx, req)
		desc := fmt.Sprintf("%s(%+v): memory %+v, %s; rediscore %+v, %s", what, req, am, errClass(errm), ar, errClass(errr))
		t.Log(desc)
		if errClass(errm) != errClass(errr) || am.Holds != ar.Holds || (am.TTL == 0) != (ar.TTL == 0) || !near(am.TTL, ar.TTL) ||
			am.Taken != ar.Taken {
			t.Fatalf("differ: %s", desc)
		}
		if !tokens[req.Key].same(am.Token, ar.Token) {
			t.Fatalf("tokens differ: %s", desc)
		}
		if am.Holds > 0 && !req.Shared && req.Limit == 0 && !req.Fair && req.Wait == 0 {
			// Such a request does not read the queue on Redis: the owner's entry, if any,
			// stays there (Kinds/Model allows both); memory takes it out.
			if err := red.Dequeue(ctx, req.Key, req.Owner); err != nil {
				t.Fatal(err)
			}
		}
		if am.Holds > 0 {
			ends[[2]string{req.Key, req.Owner}] = time.Now().Add(req.TTL)
			everHeld[[2]string{req.Key, req.Owner}] = true
			for _, r := range ids {
				if r.req.Key == req.Key && r.req.Owner == req.Owner && r.req.ID != req.ID {
					r.stale = true
				}
			}
		}
		if req.ID != "" && errm == nil && what == "Acquire" {
			ids = append(ids, &diffAcquire{req: req})
		}
	}
	var releases []locker.ReleaseRequest // sent with an ID, to be sent again
	release := func(t *rapid.T, req locker.ReleaseRequest) {
		nm, errm := mem.Release(ctx, req)
		nr, errr := red.Release(ctx, req)
		desc := fmt.Sprintf("Release(%+v): memory %d, %s; rediscore %d, %s", req, nm, errClass(errm), nr, errClass(errr))
		t.Log(desc)
		if errClass(errm) != errClass(errr) || (errm == nil && nm != nr) {
			t.Fatalf("differ: %s", desc)
		}
	}
	rt.Repeat(map[string]func(*rapid.T){
		"Acquire": func(t *rapid.T) {
			req := locker.AcquireRequest{
				Key: drawKey(t), Owner: drawOwner(t),
				TTL:     time.Duration(rapid.IntRange(1, 5).Draw(t, "ttl units")) * unit,
				ID:      newID(t),
				Reentry: rapid.IntRange(0, 4).Draw(t, "reentry") == 0,
				Fence:   rapid.Bool().Draw(t, "fence"),
				Shared:  rapid.Bool().Draw(t, "shared"),
				Fair:    rapid.Bool().Draw(t, "fair"),
			}
			// Fresh: the owner held nothing on the key before (as the Client makes them).
			req.Fresh = !req.Reentry && !everHeld[[2]string{req.Key, req.Owner}] && rapid.Bool().Draw(t, "fresh")
			if rapid.Bool().Draw(t, "wait") {
				req.Wait = time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units")) * unit
			}
			acquire(t, req, "Acquire")
		},
		"AcquirePermit": func(t *rapid.T) {
			key := drawKey(t)
			req := locker.AcquireRequest{
				Key: key, Owner: drawOwner(t), Limit: limits[key],
				TTL:     time.Duration(rapid.IntRange(1, 5).Draw(t, "ttl units")) * unit,
				ID:      newID(t),
				Reentry: rapid.IntRange(0, 4).Draw(t, "reentry") == 0,
				Fence:   rapid.Bool().Draw(t, "fence"),
				Shared:  rapid.Bool().Draw(t, "shared"), // implied
				Fair:    rapid.Bool().Draw(t, "fair"),
			}
			if rapid.IntRange(0, 5).Draw(t, "another limit") == 0 {
				req.Limit = rapid.IntRange(1, 4).Draw(t, "limit")
			}
			req.Fresh = !req.Reentry && !everHeld[[2]string{req.Key, req.Owner}] && rapid.Bool().Draw(t, "fresh")
			if rapid.Bool().Draw(t, "wait") {
				req.Wait = time.Duration(rapid.IntRange(1, 5).Draw(t, "wait units")) * unit
			}
			if rapid.Bool().Draw(t, "grant") { // asked for by a fresh request that waits, else ignored
				req.Grant = time.Duration(rapid.IntRange(1, 5).Draw(t, "grant units")) * unit
			}
			acquire(t, req, "Acquire")
		},
		"HandOff": func(t *rapid.T) {
			nextID++
			req := locker.HandOffRequest{Key: drawKey(t), From: drawOwner(t), To: fmt.Sprintf("t%d", nextID),
				TTL: time.Duration(rapid.IntRange(1, 5).Draw(t, "ttl units")) * unit, Fence: rapid.Bool().Draw(t, "fence")}
			for send := range rapid.IntRange(1, 2).Draw(t, "sends") {
				hm, errm := mem.HandOff(ctx, req)
				hr, errr := red.HandOff(ctx, req)
				desc := fmt.Sprintf("HandOff(%+v), send %d: memory %+v, %s; rediscore %+v, %s", req, send+1, hm, errClass(errm), hr, errClass(errr))
				t.Log(desc)
				if errClass(errm) != errClass(errr) || hm.Holds != hr.Holds || hm.Queued != hr.Queued {
					t.Fatalf("differ: %s", desc)
				}
				if !tokens[req.Key].same(hm.Token, hr.Token) {
					t.Fatalf("tokens differ: %s", desc)
				}
				if errm != nil {
					return
				}
			}
			ends[[2]string{req.Key, req.To}] = time.Now().Add(req.TTL)
			everHeld[[2]string{req.Key, req.To}] = true
			owners = append(owners, req.To) // it holds the key: later calls may use it
		},
		"AcquireAgain": func(t *rapid.T) {
			if len(ids) == 0 {
				t.Skip("no ID")
			}
			r := rapid.SampledFrom(ids).Draw(t, "request")
			acquire(t, r.req, "AcquireAgain")
		},
		"Release": func(t *rapid.T) {
			// Fresh or not, whatever the owner: the two must agree on every request (a fresh
			// owner's last release is remembered by neither).
			req := locker.ReleaseRequest{Key: drawKey(t), Owner: drawOwner(t), ID: newID(t), Shared: rapid.Bool().Draw(t, "shared"),
				Fresh: rapid.Bool().Draw(t, "fresh")}
			release(t, req)
			if req.ID != "" {
				releases = append(releases, req)
			}
		},
		"ReleaseAgain": func(t *rapid.T) {
			if len(releases) == 0 {
				t.Skip("no Release with an ID")
			}
			release(t, rapid.SampledFrom(releases).Draw(t, "release"))
		},
		"Undo": func(t *rapid.T) {
			if len(ids) == 0 {
				t.Skip("no ID")
			}
			var fine []*diffAcquire
			for _, r := range ids {
				if !r.stale || !r.req.Fresh {
					fine = append(fine, r)
				}
			}
			if len(fine) == 0 {
				t.Skip("no ID")
			}
			r := rapid.SampledFrom(fine).Draw(t, "request").req
			release(t, locker.ReleaseRequest{Key: r.Key, Owner: r.Owner, ID: r.ID, Undo: true, Fresh: r.Fresh, Shared: r.Shared || r.Limit > 0})
		},
		"Renew": func(t *rapid.T) {
			rn := locker.Renewal{Key: drawKey(t), Owner: drawOwner(t), TTL: time.Duration(rapid.IntRange(1, 5).Draw(t, "ttl units")) * unit}
			em := mem.Renew(ctx, []locker.Renewal{rn})[0]
			er := red.Renew(ctx, []locker.Renewal{rn})[0]
			desc := fmt.Sprintf("Renew(%+v): memory %s, rediscore %s", rn, errClass(em), errClass(er))
			t.Log(desc)
			if errClass(em) != errClass(er) {
				t.Fatalf("differ: %s", desc)
			}
			if em == nil {
				ends[[2]string{rn.Key, rn.Owner}] = time.Now().Add(rn.TTL)
			}
		},
		"Inspect": func(t *rapid.T) {
			key := drawKey(t)
			sm, errm := mem.Inspect(ctx, key)
			sr, errr := red.Inspect(ctx, key)
			desc := fmt.Sprintf("Inspect(%s): memory %+v, %s; rediscore %+v, %s", key, sm, errClass(errm), sr, errClass(errr))
			t.Log(desc)
			ttlm, ttlr := sm.TTL, sr.TTL
			sm.TTL, sr.TTL = 0, 0
			hm, hr := sm.Holders, sr.Holders
			sm.Holders, sr.Holders = nil, nil
			if errClass(errm) != errClass(errr) || !reflect.DeepEqual(sm, sr) || !near(ttlm, ttlr) || !sameHolders(hm, hr) {
				t.Fatalf("differ: %s", desc)
			}
		},
		"ForceRelease": func(t *rapid.T) {
			key := drawKey(t)
			bm, errm := mem.ForceRelease(ctx, key)
			br, errr := red.ForceRelease(ctx, key)
			desc := fmt.Sprintf("ForceRelease(%s): memory %v, %s; rediscore %v, %s", key, bm, errClass(errm), br, errClass(errr))
			t.Log(desc)
			if errClass(errm) != errClass(errr) || bm != br {
				t.Fatalf("differ: %s", desc)
			}
		},
		"Dequeue": func(t *rapid.T) {
			key, owner := drawKey(t), drawOwner(t)
			errm := mem.Dequeue(ctx, key, owner)
			errr := red.Dequeue(ctx, key, owner)
			desc := fmt.Sprintf("Dequeue(%s, %s): memory %s, rediscore %s", key, owner, errClass(errm), errClass(errr))
			t.Log(desc)
			if errClass(errm) != errClass(errr) {
				t.Fatalf("differ: %s", desc)
			}
		},
		"Advance": func(t *rapid.T) {
			d := time.Duration(rapid.IntRange(1, 300).Draw(t, "ms")) * time.Millisecond
			t.Logf("Advance(%v)", d)
			time.Sleep(d)
			stepOverEnds(t, ends)
		},
	})
}

// stepOverEnds moves time one millisecond on while it is exactly at the end of a lease in ends:
// there, a reader that read alone and was joined by another still holds on Redis (its own end is
// the key's TTL rounded up by at most a millisecond, docs/redis.md) but not on memory.
func stepOverEnds(t *rapid.T, ends map[[2]string]time.Time) {
	for {
		now, at := time.Now(), false
		for _, end := range ends {
			at = at || end.Equal(now)
		}
		if !at {
			return
		}
		t.Logf("Advance(1ms): at the end of a lease")
		time.Sleep(time.Millisecond)
	}
}

// sameHolders reports whether two backends report the same holders, with remaining leases
// near each other.
func sameHolders(a, b []locker.Holder) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Owner != b[i].Owner || a[i].Holds != b[i].Holds || !near(a[i].TTL, b[i].TTL) {
			return false
		}
	}
	return true
}

// tokenPairs pairs the fencing tokens of one key that memory and rediscore report: each new
// token of one backend must come with a new token of the other, greater than every earlier one
// on both, and a token reported again with its pair.
type tokenPairs struct {
	red     map[uint64]uint64 // memory's token -> rediscore's
	mem     map[uint64]uint64 // rediscore's token -> memory's
	lastMem uint64
	lastRed uint64
}

// same reports whether m and r, the tokens of one call on memory and rediscore, are the same
// draw, and records them when they are new.
func (p *tokenPairs) same(m, r uint64) bool {
	if m == 0 || r == 0 {
		return m == r
	}
	if p.red == nil {
		p.red, p.mem = map[uint64]uint64{}, map[uint64]uint64{}
	}
	pr, okm := p.red[m]
	pm, okr := p.mem[r]
	switch {
	case okm || okr:
		return okm && okr && pr == r && pm == m
	case m <= p.lastMem || r <= p.lastRed:
		return false // a new token on both, but not above every earlier one
	}
	p.red[m], p.mem[r], p.lastMem, p.lastRed = r, m, m, r
	return true
}
