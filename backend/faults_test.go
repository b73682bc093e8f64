// Fault-injection tests: every Redis driver's client reaches a real redis-server through an
// internal/testkit/faultproxy proxy that black-holes, delays, resets or loses replies, while the test
// reads the truth from the server over a connection of its own (redistest.Do). This file holds
// what those tests share; each property has its own file (blackhole_test.go, replydrop_test.go,
// recovery_test.go, takeback_test.go, restart_test.go).
//
// A note on the black hole. The proxy's Blackhole throws bytes away inside TCP connections that
// stay open, which no real network does: a partition delays bytes (TCP sends them again) or ends
// with the connection reset by a timeout. A driver that keeps using such a connection after Heal
// waits for replies that will never come, or matches replies to the wrong commands (rueidis
// pipelines). So the tests follow every Heal with a Reset, as a real partition long enough to
// matter ends: the connections that lived through it are gone, the drivers dial new ones.
package backend_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/faultproxy"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// The drivers' own retries matter under faults, and the tests use each driver as the drivers
// table builds it:
//   - go-redis (MaxRetries 3 by default) sends a command again by itself, on a new connection,
//     when its connection broke after the command was written: a script whose reply was lost is
//     run twice on the server. That is good here: it exercises the request-ID markers, which
//     make the second run report the first one's outcome instead of adding a hold.
//   - rueidis does not send a script again by itself (it retries read-only commands only), and
//     neither does Redigo: a lost reply comes back to the Backend as an error wrapping
//     locker.ErrUnavailable, and the Client sends the request again with the same ID.

// faulty is a redis-server with a fault proxy in front of it: drivers connect to the proxy
// (backend), the test observes the server directly (srv).
type faulty struct {
	srv   *redistest.Server
	proxy *faultproxy.Proxy
}

// startFaulty starts a server with opts and a proxy in front of it, and loads the canonical
// scripts so that drivers send EVALSHA with each script's SHA1 (which DropRepliesTo matches)
// rather than falling back to EVAL first.
func startFaulty(t *testing.T, opts ...redistest.Option) *faulty {
	t.Helper()
	srv := redistest.StartServer(t, opts...)
	f := &faulty{srv: srv, proxy: faultproxy.Start(t, srv.Addr)}
	f.loadScripts(t)
	return f
}

// withProxy returns a view of f's server through a proxy of its own, whose faults touch no
// other view.
func (f *faulty) withProxy(t *testing.T) *faulty {
	t.Helper()
	return &faulty{srv: f.srv, proxy: faultproxy.Start(t, f.srv.Addr)}
}

// backend returns a backend of driver d connected through the proxy.
func (f *faulty) backend(t *testing.T, d driver) locker.Locker {
	t.Helper()
	return d.new(t, f.proxy.Addr())
}

// direct returns a backend of driver d connected to the server itself, for the parties that the
// faults must not touch (a holder or a competitor).
func (f *faulty) direct(t *testing.T, d driver) locker.Locker {
	t.Helper()
	return d.new(t, f.srv.Addr)
}

// loadScripts loads every canonical script into the server's script cache.
func (f *faulty) loadScripts(t *testing.T) {
	t.Helper()
	for _, s := range rediscore.Scripts() {
		if sha := f.srv.Do(t, "SCRIPT", "LOAD", s.Source); sha != s.SHA1 {
			t.Fatalf("SCRIPT LOAD %s = %v, want %s", s.Name, sha, s.SHA1)
		}
	}
}

// healAndReset ends every fault and resets the connections that lived through them (see the
// file comment).
func (f *faulty) healAndReset() {
	f.proxy.Heal()
	f.proxy.Reset()
}

// holdsOn returns the lock hash at key as the server has it: owner token -> hold count (empty
// when the key does not exist). It fails the test unless the hash has the lock marker.
func holdsOn(t *testing.T, srv *redistest.Server, key string) map[string]int {
	t.Helper()
	fields, _ := srv.Do(t, "HGETALL", key).([]any)
	m := make(map[string]int, len(fields)/2)
	marked := len(fields) == 0
	for i := 0; i+1 < len(fields); i += 2 {
		owner, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		if owner == "" {
			marked = v == "locker" || v == "locker:quiet" // the exclusive lock's marks (backend/rediscore/lua/lib.lua)
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("HGETALL %s: hold count %q of %q: %v", key, v, owner, err)
		}
		m[owner] = n
	}
	if !marked {
		t.Fatalf("HGETALL %s = %v: no lock marker", key, fields)
	}
	return m
}

// wantHolds fails the test unless the server has exactly one owner on key with holds holds, or
// no key at all when holds is 0.
func wantHolds(t *testing.T, srv *redistest.Server, key string, holds int, what string) {
	t.Helper()
	m := holdsOn(t, srv, key)
	switch {
	case holds == 0 && len(m) == 0:
		return
	case len(m) == 1:
		for _, n := range m {
			if n == holds {
				return
			}
		}
	}
	t.Fatalf("%s: the server has %v on %s, want one owner with %d holds", what, m, key, holds)
}

// pttl returns the server's PTTL of key in milliseconds (-2: no key, -1: no expiry).
func pttl(t *testing.T, srv *redistest.Server, key string) int64 {
	t.Helper()
	n, ok := srv.Do(t, "PTTL", key).(int64)
	if !ok {
		t.Fatalf("PTTL %s: not an integer", key)
	}
	return n
}

// waitUntil polls cond every 5ms until it holds, and fails the test with what if it does not
// within limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// evalshaCalls returns how many EVALSHA commands the server has run since it started.
func evalshaCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "commandstats").(string)
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		return n
	}
	return 0
}

// lockWithin locks key with c, failing the test unless it is granted within limit; it returns
// the lease and how long it took. The lease's context does not end with the limit (it derives
// from the Lock's ctx): the ctx is cancelled only if Lock is still waiting at the limit, or at the
// end of the test.
func lockWithin(t *testing.T, c *locker.Client, key string, limit time.Duration) (*locker.Lease, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	timer := time.AfterFunc(limit, cancel)
	start := time.Now()
	l, err := c.Lock(ctx, key)
	took := time.Since(start)
	if !timer.Stop() || err != nil {
		t.Fatalf("Lock %s: %v after %v (limit %v)", key, err, took, limit)
	}
	return l, took
}

// goneWatch is a backend that remembers the keys on which a renewal found the hold gone
// (ErrNotHeld). A lease context that ends with ErrLockLost with no such renewal ended because
// the Client could not confirm the lease in time: its renewals came back too late, as they do
// on a machine stalled for a good part of a TTL, and ending the lease is then the safe way to
// fail. One that ends after such a renewal, while the hold is on the server, is a bug.
type goneWatch struct {
	locker.Locker
	mu   sync.Mutex
	gone map[string]bool
}

func (g *goneWatch) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := g.Locker.Renew(ctx, batch)
	for i, err := range errs {
		if errors.Is(err, locker.ErrNotHeld) {
			g.mu.Lock()
			if g.gone == nil {
				g.gone = make(map[string]bool)
			}
			g.gone[batch[i].Key] = true
			g.mu.Unlock()
		}
	}
	return errs
}

// foundGone reports whether a renewal found the hold on key gone.
func (g *goneWatch) foundGone(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gone[key]
}

// concurrently runs f as subtests of t named names[i], all at once, and returns when all have
// finished. The fault tests spend their time waiting for timers, leases and faults, so they run
// side by side whatever -parallel says (t.Run from several goroutines; t.Parallel would be held
// to -parallel, which is GOMAXPROCS).
func concurrently(t *testing.T, names []string, f func(t *testing.T, i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { t.Run(name, func(t *testing.T) { f(t, i) }) })
	}
	wg.Wait()
}

// forEachDriver runs f for every driver, concurrently (see concurrently).
func forEachDriver(t *testing.T, f func(t *testing.T, d driver)) {
	t.Helper()
	names := make([]string, len(drivers))
	for i, d := range drivers {
		names[i] = d.name
	}
	concurrently(t, names, func(t *testing.T, i int) { f(t, drivers[i]) })
}

// stats collects measurements of a property for the test log; it is safe for concurrent use.
type stats struct {
	mu                 sync.Mutex
	trials, violations int
	min, max           time.Duration
}

// add records one trial that measured d, and whether it violated the property.
func (s *stats) add(d time.Duration, violated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trials == 0 || d < s.min {
		s.min = d
	}
	if s.trials == 0 || d > s.max {
		s.max = d
	}
	s.trials++
	if violated {
		s.violations++
	}
}

func (s *stats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d trials, %d violations, min %v, max %v", s.trials, s.violations, s.min, s.max)
}
