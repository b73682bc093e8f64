// Tests of the Redis backends on servers that authenticate their clients: one with a password
// (requirepass), and one with an ACL user restricted to a key prefix, the notice channels of its
// keys and the commands that the drivers and the scripts send (the ACL that docs/security.md
// documents).
package backend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	redigolocker "github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/backend/rediscore"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	valkeylocker "github.com/hashlock/locker/backend/valkey"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// An authDriver makes a backend of one Redis driver that authenticates as user with pass (an
// empty user: the default user, as with requirepass), configured by opts. A driver that connects
// eagerly (rueidis, valkey-go) reports a refused authentication as an error here; the others report it on
// first use.
type authDriver struct {
	name string
	new  func(t conformance.TB, addr, user, pass string, opts ...rediscore.Option) (locker.Locker, error)
}

var authDrivers = []authDriver{
	{"goredis", func(t conformance.TB, addr, user, pass string, opts ...rediscore.Option) (locker.Locker, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: pass, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return goredis.New(rdb, opts...), nil
	}},
	{"rueidis", func(t conformance.TB, addr, user, pass string, opts ...rediscore.Option) (locker.Locker, error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, Username: user, Password: pass})
		if err != nil {
			return nil, err
		}
		t.Cleanup(c.Close)
		return rueidislocker.New(c, opts...), nil
	}},
	{"redigo", func(t conformance.TB, addr, user, pass string, opts ...rediscore.Option) (locker.Locker, error) {
		pool := &redigo.Pool{
			// Bounded, as docs/redis.md advises: 10,000 waiting goroutines must not dial 10,000
			// connections (TestNoticeConnectionsBounded).
			MaxIdle: 8, MaxActive: 64, Wait: true,
			DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", addr, redigo.DialUsername(user), redigo.DialPassword(pass))
			},
		}
		t.Cleanup(func() { pool.Close() })
		return redigolocker.New(pool, opts...), nil
	}},
	{"valkey", func(t conformance.TB, addr, user, pass string, opts ...rediscore.Option) (locker.Locker, error) {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, Username: user, Password: pass})
		if err != nil {
			return nil, err
		}
		t.Cleanup(c.Close)
		return valkeylocker.New(c, opts...), nil
	}},
}

// lockerACL is the ACL of the restricted user, as ACL SETUSER arguments after the user name: the
// docs/security.md documents it for the prefix "app:". Each entry is needed: without it
// a step below fails or the server logs a refusal.
var lockerACL = []string{
	"on", ">lockpw", "resetkeys", "resetchannels",
	// The locks and their companions (request markers, fencing counters, notice channels:
	// rediscore.FenceKey, MarkerKey, Channel) all start with the key, or with a long key's first
	// 64 bytes.
	"~app:*", "&app:*",
	"-@all",
	// The scripts, with the EVAL and SCRIPT LOAD fallbacks, and the commands they call.
	"+evalsha", "+eval", "+script|load",
	"+exists", "+hexists", "+hget", "+hset", "+hincrby", "+hdel", "+hgetall", "+pexpire", "+pttl", "+del", "+spublish",
	// Request markers and fencing counters.
	"+get", "+set", "+time",
	// Notices: a key's channel leaves a shared connection with SUNSUBSCRIBE; rueidis and valkey-go
	// ping their connections.
	"+ssubscribe", "+sunsubscribe", "+ping",
	// rueidis and valkey-go: client-side caching (unless DisableCache) and its cluster probe of the address
	// (unless ForceSingleClient).
	"+client|tracking", "+cluster|slots",
}

// With requirepass, every driver given the password locks, re-enters, refuses other owners,
// unlocks and wakes waiters by release notices (its subscriptions authenticate too); given a
// wrong password, it fails at once.
func TestRequirePass(t *testing.T) {
	srv := redistest.StartServer(t)
	// Set at run time: redistest probes a starting server with PING, unauthenticated.
	srv.Do(t, "CONFIG", "SET", "requirepass", "adminpw")
	if _, err := redistest.Do(srv.Addr, redistest.DefaultTimeout, "PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without a password: %v, want NOAUTH", err)
	}
	for _, d := range authDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			newBackend := func() locker.Locker {
				b, err := d.new(t, srv.Addr, "", "adminpw")
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			exercise(t, newBackend, "auth:"+d.name)

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b, err := d.new(t, srv.Addr, "", "wrongpw")
			if err == nil {
				c := locker.New(b)
				defer c.Close()
				_, err = c.Lock(ctx, "auth:wrong:"+d.name)
			}
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("Lock with a wrong password: %v (context: %v), want a WRONGPASS error before the deadline", err, ctx.Err())
			}
		})
	}
}

// A user restricted by lockerACL can do everything on keys under its prefix, with and without a
// hash tag, with stray braces, and longer than a companion keeps (issue 12, item 6), also after
// the server lost its script cache; a key outside the prefix is refused with NOPERM. Nothing else
// any driver sends is refused: the server's ACL log has no other entry.
func TestRestrictedACLUser(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Do(t, append([]string{"ACL", "SETUSER", "locker"}, lockerACL...)...)
	srv.Do(t, "ACL", "LOG", "RESET")
	for _, d := range authDrivers {
		t.Run(d.name, func(t *testing.T) {
			newBackend := func() locker.Locker {
				b, err := d.new(t, srv.Addr, "locker", "lockpw")
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			flush := func() { srv.Do(t, "SCRIPT", "FLUSH") }
			exercise(t, newBackend, "app:"+d.name, flush)
			exercise(t, newBackend, "app:{"+d.name+"}:tagged", flush)
			for _, key := range []string{"x{}y", "a{b", "}x", strings.Repeat("k", 200)} {
				exercise(t, newBackend, "app:"+d.name+":"+key)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c := locker.New(newBackend())
			defer c.Close()
			_, err := c.Lock(ctx, "other:"+d.name)
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Fatalf("Lock outside the prefix: %v (context: %v), want a NOPERM error before the deadline", err, ctx.Err())
			}
		})
	}
	for _, e := range aclLog(t, srv) {
		if e["username"] == "locker" && e["reason"] == "key" && strings.HasPrefix(e["object"], "other:") {
			continue
		}
		t.Errorf("ACL log: %v", e)
	}
}

// exercise runs the lock's life on key with backends of newBackend: lock, re-enter, inspect,
// another owner refused, readers with leases of different lengths, renew, unlock twice,
// force-unlock, and waiters on key and on a second
// key, woken by release notices one after the other (so the first one's channel leaves a
// connection that carries the second's). Each flush, if any, runs before the steps so that each
// script runs first after the server lost its script cache.
func exercise(t *testing.T, newBackend func() locker.Locker, key string, flush ...func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flushed := func() {
		for _, f := range flush {
			f()
		}
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s %s: %v", what, key, err)
		}
	}
	b := newBackend()
	c := locker.New(b, locker.WithTTL(30*time.Second), locker.WithFencing())
	defer c.Close()
	other := locker.New(b)
	defer other.Close()

	flushed()
	outer, err := c.Lock(ctx, key)
	must("lock", err)
	inner, err := c.Lock(outer.Context(), key)
	must("re-enter", err)
	if outer.Token() == 0 || inner.Token() != outer.Token() {
		t.Fatalf("fencing tokens %d (lock) and %d (re-entry): want one token > 0", outer.Token(), inner.Token())
	}
	flushed()
	st, err := c.Inspect(ctx, key)
	must("inspect", errors.Join(err, errIf(st.Holds != 2, fmt.Sprintf("%d holds, want 2", st.Holds))))
	if _, err := other.TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("TryLock %s by another owner: %v, want ErrNotObtained", key, err)
	}
	must("unlock", inner.Unlock())
	must("unlock", outer.Unlock())

	// Readers with leases of their own: a second reader joins with a shorter lease (the first
	// one's gets its end), the first leaves, a writer is refused while the second reads, and gets
	// the key once it left.
	r1, err := c.RLock(ctx, key)
	must("read-lock", err)
	short := locker.New(b, locker.WithTTL(10*time.Second))
	defer short.Close()
	r2, err := short.RLock(ctx, key)
	must("read-lock", err)
	flushed()
	must("renew", errors.Join(b.Renew(ctx, []locker.Renewal{{Key: key, Owner: r2.Owner(), TTL: 10 * time.Second}})...))
	must("unlock", r1.Unlock())
	if l, err := other.TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
		_ = l.Unlock()
		t.Fatalf("TryLock %s beside a reader: %v, want ErrNotObtained", key, err)
	}
	must("unlock", r2.Unlock())
	writer, err := other.TryLock(ctx, key)
	must("lock after the readers", err)
	must("unlock", writer.Unlock())

	// Renewal batches, also after the script cache was lost, and a forced release.
	a, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "renewer", TTL: time.Minute})
	must("acquire", errors.Join(err, errIf(err == nil && !a.Acquired(), "refused")))
	flushed()
	for _, err := range b.Renew(ctx, []locker.Renewal{{Key: key, Owner: "renewer", TTL: time.Minute}}) {
		must("renew", err)
	}
	flushed()
	removed, err := c.ForceUnlock(ctx, key)
	must("force-unlock", errors.Join(err, errIf(!removed, "nothing removed")))

	// Waiters, on a backend (and so subscriptions) of their own, woken by the release notices:
	// their retry is an hour away and the holder's lease 30s.
	w := &refusals{Locker: newBackend(), seen: make(chan struct{}, 8)}
	wc := locker.New(w)
	defer wc.Close()
	second := key + ":second"
	var releases []func()
	for _, k := range []string{second, key} {
		held, err := c.Lock(ctx, k)
		must("lock", err)
		got := make(chan error, 1)
		go func() {
			l, err := wc.Lock(ctx, k, locker.WithRetry(locker.LinearBackoff(time.Hour)))
			if err == nil {
				err = l.Unlock()
			}
			got <- err
		}()
		for range 2 { // refused before subscribing, and after: now it waits
			select {
			case <-w.seen:
			case err := <-got:
				t.Fatalf("the waiter on %s stopped before waiting: %v", k, err)
			case <-time.After(5 * time.Second):
				t.Fatalf("the waiter on %s did not wait within 5s", k)
			}
		}
		releases = append(releases, func() {
			flushed()
			released := time.Now()
			must("unlock", held.Unlock())
			select {
			case err := <-got:
				must("waiter's lock", err)
			case <-time.After(5 * time.Second):
				t.Fatalf("the waiter on %s was not woken by the release notice", k)
			}
			if d := time.Since(released); d > 2*time.Second {
				t.Fatalf("the waiter on %s took %v after the release", k, d)
			}
		})
	}
	releases[1]() // key
	releases[0]() // second
}

// aclLog returns the server's ACL log entries, each as its string fields.
func aclLog(t *testing.T, srv *redistest.Server) []map[string]string {
	t.Helper()
	entries, _ := srv.Do(t, "ACL", "LOG").([]any)
	var out []map[string]string
	for _, e := range entries {
		fields, _ := e.([]any)
		m := map[string]string{}
		for i := 0; i+1 < len(fields); i += 2 {
			k, _ := fields[i].(string)
			m[k] = fmt.Sprint(fields[i+1])
		}
		out = append(out, m)
	}
	return out
}
