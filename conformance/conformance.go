// Package conformance is the executable contract of [locker.Locker]: a property-based state
// machine that checks a backend against a reference model, and properties of a [locker.Client]
// running on it (re-entry, watchdog, expiry, lost leases, notices, mutual exclusion, input
// validation, Close). Every backend of this module passes it, and a backend of your own can run
// it from a test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Factory{
//			New: func(t conformance.TB) locker.Locker { return mybackend.New(...) },
//		})
//	}
//
// A behaviour the suite does not check is not guaranteed. Failures of the state machine are
// shrunk to a short sequence of steps and print a seed that replays them (-rapid.seed=N).
package conformance

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
)

// Factory describes the backend under test and how time passes for it.
type Factory struct {
	// New returns a fresh, empty backend for one test case and registers its clean-up with
	// t.Cleanup. Keys are namespaced per case, so backends sharing one server are fine. Required.
	New func(t TB) locker.Locker

	// Synctest runs every case inside a testing/synctest bubble (New included), for backends
	// whose only clock is the time package and that start no goroutine outside the bubble, such
	// as backend/memory: sleeps take no real time and timing is exact. Default false: real time,
	// for backends behind a network, where the suite measures each call's send and return times
	// and accepts any outcome consistent with them.
	Synctest bool

	// TTL is the lease length the timed properties use; the state machine uses leases of TTL/20
	// to TTL/4. It should be long compared with the backend's round trip and with scheduling
	// delays under -race on a loaded machine: a renewal that comes later than two thirds of it
	// loses the lease. Default 1s.
	TTL time.Duration

	// Foreign, when set, stores at key a value that is not a lock but that the backend's store
	// can hold (on Redis: a list, a string, somebody else's hash...): the i-th such kind, from
	// i = 0. It returns a function that reports whether the value is still there unchanged, or
	// nil when there is no i-th kind. The NotALock property uses it to check that every
	// operation refuses such a key with ErrNotALock and leaves it as it is. Default nil: the
	// property is skipped (backend/memory stores nothing but locks).
	Foreign func(t TB, key string, i int) (intact func() bool)
}

// TB is the part of *testing.T (and of rapid's *rapid.T) that Factory.New may use.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Run runs the whole suite as subtests of t: "Model" (the state machine, drawing plain exclusive
// holds only), "Client" (one subtest per Client property), "Exclusion", and "Kinds": for a
// locker.KindLocker, the same state machine drawing also shared holds and wait queues
// ("Kinds/Model", with HandOff when the backend is a locker.HandOffer and grants when it is a
// locker.Granter) and one subtest per property of Client.RLock and WithFair; for any other
// backend, "Kinds/Unsupported" checks that those return an error wrapping
// errors.ErrUnsupported, and the rest is skipped.
func Run(t *testing.T, f Factory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("conformance: Factory.New is required")
	}
	s := &suite{f: f, ttl: f.TTL}
	if s.ttl <= 0 {
		s.ttl = time.Second
	}
	t.Run("Model", s.model)
	t.Run("Client", s.client)
	t.Run("Exclusion", func(t *testing.T) { s.inCase(t, exclusion) })
	t.Run("Kinds", s.kinds)
	t.Run("Semaphores", s.semaphores)
}

type suite struct {
	f   Factory
	ttl time.Duration
}

// property is one Client property of the suite: a subtest name and its body, run as a case.
type property struct {
	name string
	body func(e *env)
}

// properties runs each of props as a subtest of t, in a case of its own (inCase).
func (s *suite) properties(t *testing.T, props []property) {
	for _, p := range props {
		t.Run(p.name, func(t *testing.T) { s.inCase(t, p.body) })
	}
}

// raise makes most at least n: the highest count a property saw.
func raise(most *atomic.Int32, n int32) {
	for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
	}
}

// env is what a case works with: the backend behind a probe that counts and can fail calls, the
// lease length, and a namespace for keys.
type env struct {
	t       *testing.T
	probe   *probe
	ttl     time.Duration
	ns      string
	sync    bool                                               // inside a synctest bubble
	foreign func(t TB, key string, i int) (intact func() bool) // Factory.Foreign
}

// key returns a key unique to this case.
func (e *env) key(name string) string { return e.ns + name }

// kind reports whether the backend under test is a locker.KindLocker.
func (e *env) kind() bool {
	_, ok := e.probe.faults.Locker.(locker.KindLocker)
	return ok
}

// backend is the probed backend, a locker.HandOffer or a locker.KindLocker when the backend
// under test is one (its HandOff calls counted).
func (e *env) backend() locker.Locker {
	if _, ok := e.probe.faults.Locker.(locker.HandOffer); ok {
		return e.probe.Counter.Backend()
	}
	if e.kind() {
		return kindProbe{e.probe}
	}
	return e.probe
}

// client returns a Client over the probed backend, closed at the end of the case.
func (e *env) client(opts ...locker.Option) *locker.Client {
	c := locker.New(e.backend(), append([]locker.Option{locker.WithTTL(e.ttl)}, opts...)...)
	e.t.Cleanup(func() { c.Close() })
	return c
}

// settle lets the goroutines of the case run until they block: exact inside a bubble, a short
// real sleep otherwise (only used where a notice or a signal would not tell more).
func (e *env) settle() {
	if e.sync {
		synctest.Wait()
		return
	}
	time.Sleep(e.ttl / 20)
}

// inCase runs body as one case with a fresh backend, inside a bubble when the factory asks.
func (s *suite) inCase(t *testing.T, body func(e *env)) {
	t.Helper()
	run := func(t *testing.T, sync bool) {
		b := s.f.New(t)
		e := &env{t: t, probe: newProbe(b), ttl: s.ttl, ns: namespace(), sync: sync, foreign: s.f.Foreign}
		body(e)
	}
	if s.f.Synctest {
		synctest.Test(t, func(t *testing.T) { run(t, true) })
		return
	}
	run(t, false)
}

// background is a context for calls that a case does not mean to bound: it ends the case's
// round trips after a minute, so a hung backend fails the test instead of hanging it.
func background(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
