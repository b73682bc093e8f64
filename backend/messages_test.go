package backend_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/internal/testkit/pgtest"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// An error message says each thing once, one clause per layer: the package once, the key once,
// no clause twice (the layers' answers to "cannot upgrade" used to be "locker: lock "k": goredis:
// acquire "k": locker: cannot upgrade a shared hold to an exclusive one (the owner holds the lock
// shared: an exclusive hold would be an upgrade)"). And every backend answers the same fault with
// the same words, but for its own name: memory, every Redis driver and PostgreSQL; the quorum,
// which words its own layer, says each thing once too.
func TestErrorMessagesSayEachThingOnce(t *testing.T) {
	type backend struct {
		name string
		new  func() locker.Locker
		srv  *redistest.Server // nil for memory, postgres and the quorum
		pg   *pgtest.Server    // for postgres
	}
	backends := []backend{{name: "memory", new: func() locker.Locker { return memory.New() }}}
	for _, d := range drivers {
		srv := redistest.StartServer(t)
		backends = append(backends, backend{name: d.name, srv: srv, new: func() locker.Locker { return d.new(t, srv.Addr) }})
	}
	if pgtest.Binary("initdb") != "" || os.Getenv(pgtest.RequireEnv) == "1" {
		pg := pgtest.Start(t)
		pool := pg.Pool(t, "pool_max_conns=4")
		b := postgres.New(pool)
		t.Cleanup(b.Close)
		if err := b.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		backends = append(backends, backend{name: "postgres", pg: pg, new: func() locker.Locker { return b }})
	}
	backends = append(backends, backend{name: "quorum", new: func() locker.Locker {
		return quorum.New(memory.New(), memory.New(), memory.New())
	}})

	words := map[string]map[string]string{} // fault -> backend -> message, with the backend's name and durations taken out
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			shared := b.new()
			c, other := locker.New(shared, locker.WithUnavailableTimeout(300*time.Millisecond)), locker.New(shared)
			defer other.Close()
			const key = "report"
			check := func(fault string, err error, want ...error) {
				t.Helper()
				for _, w := range want {
					if !errors.Is(err, w) {
						t.Errorf("%s: %v, want it to wrap %v", fault, err, w)
						return
					}
				}
				msg := err.Error()
				t.Logf("%-13s %s", fault, msg)
				sayOnce(t, fault, msg)
				if words[fault] == nil {
					words[fault] = map[string]string{}
				}
				words[fault][b.name] = normalize(msg, b.name)
			}

			if _, kinds := shared.(locker.KindLocker); kinds {
				r, err := c.RLock(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Lock(r.Context(), key)
				check("upgrade", err, locker.ErrUpgrade)
				if err := r.Unlock(); err != nil {
					t.Fatal(err)
				}
			}
			l, err := c.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = other.TryLock(ctx, key)
			check("not obtained", err, locker.ErrNotObtained)
			within, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err = other.Lock(within, key)
			cancel()
			check("ctx ended", err, locker.ErrNotObtained, context.DeadlineExceeded)
			if _, err := other.ForceUnlock(ctx, key); err != nil {
				t.Fatal(err)
			}
			_, err = c.Lock(l.Context(), key)
			check("re-entry lost", err, locker.ErrLockLost)
			check("unlock lost", l.Unlock(), locker.ErrNotHeld)

			long := strings.Repeat("k", locker.MaxKeyLen+1)
			for _, k := range []string{"", long} {
				what := map[string]string{"": "empty key", long: "long key"}[k]
				_, err = c.Lock(ctx, k)
				check("lock, "+what, err, locker.ErrInvalid)
				_, err = c.Inspect(ctx, k)
				check("inspect, "+what, err, locker.ErrInvalid)
				_, err = c.ForceUnlock(ctx, k)
				check("force, "+what, err, locker.ErrInvalid)
			}

			if b.srv != nil {
				b.srv.Do(t, "SET", "list", "x")
				_, err = c.Lock(ctx, "list")
				check("lock, not a lock", err, locker.ErrNotALock)
				_, err = c.Inspect(ctx, "list")
				check("inspect, not a lock", err, locker.ErrNotALock)
				_, err = c.ForceUnlock(ctx, "list")
				check("force, not a lock", err, locker.ErrNotALock)
				b.srv.Stop()
				_, err = c.Lock(ctx, key)
				check("server down", err, locker.ErrUnavailable)
			}
			if b.pg != nil {
				b.pg.Stop(t)
				_, err = c.Lock(ctx, key)
				check("server down", err, locker.ErrUnavailable)
			}
			c.Close()
			_, err = c.Lock(ctx, key)
			check("closed", err, locker.ErrClosed)
		})
	}

	for fault, by := range words {
		if fault == "server down" || fault == "ctx ended" {
			// The drivers' own errors differ; a ctx that ends during the first attempt, which a
			// loaded machine may make last, leaves no holder's lease to report.
			continue
		}
		var first string
		for _, b := range backends {
			msg, ok := by[b.name]
			if !ok || b.name == "quorum" {
				continue
			}
			if first == "" {
				first = b.name
				continue
			}
			if msg != by[first] {
				t.Errorf("%s: %s says %q, %s says %q", fault, b.name, msg, first, by[first])
			}
		}
	}
}

// sayOnce fails the test if msg does not start with "locker: " and name the package once, or
// repeats a clause (the text between ": " separators) or the key.
func sayOnce(t *testing.T, what, msg string) {
	t.Helper()
	if !strings.HasPrefix(msg, "locker: ") || strings.Count(msg, "locker: ") != 1 {
		t.Errorf("%s: %q does not name the package once, at its start", what, msg)
	}
	if n := strings.Count(msg, `"report"`); n > 1 {
		t.Errorf("%s: %q names the key %d times", what, msg, n)
	}
	seen := map[string]bool{}
	clauses := strings.Split(msg, ": ")
	for i := 0; i < len(clauses); i++ {
		clause := clauses[i]
		if layers[clause] && i+1 < len(clauses) {
			// A layer's clause is its name and what it did: "quorum: release" and, for one of
			// its nodes, "memory: release".
			i++
			clause += ": " + clauses[i]
		}
		if seen[clause] {
			t.Errorf("%s: %q says %q twice", what, msg, clause)
		}
		seen[clause] = true
	}
}

// layers are the names that start a layer's clause.
var layers = map[string]bool{"memory": true, "quorum": true, "goredis": true, "rueidis": true, "redigo": true, "valkey": true, "postgres": true}

// durations are the lengths of time in messages ("29.9s", "12ms").
var durations = regexp.MustCompile(`[0-9][0-9.]*(ns|µs|ms|s|m)\b`)

// normalize is msg with the backend's name as "BACKEND" and durations as "D".
func normalize(msg, backend string) string {
	return durations.ReplaceAllString(strings.ReplaceAll(msg, backend+": ", "BACKEND: "), "D")
}
