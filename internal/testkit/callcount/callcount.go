// Package callcount counts the calls a Client makes to its backend: a locker.Locker decorator
// shared by the benchmarks (round trips per operation) and the conformance suite (calls a step
// must or must not make).
package callcount

import (
	"context"
	"sync/atomic"

	"github.com/hashlock/locker"
)

// Calls counts the calls of each locker.Locker method; every call is one round trip to a
// network backend (Renew sends its whole batch in one pipeline).
type Calls struct {
	Acquire      int64 `json:"acquire"`
	Release      int64 `json:"release"`
	Renew        int64 `json:"renew"`
	RenewEntries int64 `json:"renew_entries"` // leases in all Renew batches
	Inspect      int64 `json:"inspect"`
	ForceRelease int64 `json:"force_release"`
	Subscribe    int64 `json:"subscribe"`
	Dequeue      int64 `json:"dequeue"`
	HandOff      int64 `json:"hand_off"`
}

// RoundTrips returns the number of calls: one round trip each.
func (c Calls) RoundTrips() int64 {
	return c.Acquire + c.Release + c.Renew + c.Inspect + c.ForceRelease + c.Subscribe + c.Dequeue + c.HandOff
}

// Sub returns c - d, field by field.
func (c Calls) Sub(d Calls) Calls {
	return Calls{
		Acquire:      c.Acquire - d.Acquire,
		Release:      c.Release - d.Release,
		Renew:        c.Renew - d.Renew,
		RenewEntries: c.RenewEntries - d.RenewEntries,
		Inspect:      c.Inspect - d.Inspect,
		ForceRelease: c.ForceRelease - d.ForceRelease,
		Subscribe:    c.Subscribe - d.Subscribe,
		Dequeue:      c.Dequeue - d.Dequeue,
		HandOff:      c.HandOff - d.HandOff,
	}
}

// Add returns c + d, field by field.
func (c Calls) Add(d Calls) Calls {
	return Calls{
		Acquire:      c.Acquire + d.Acquire,
		Release:      c.Release + d.Release,
		Renew:        c.Renew + d.Renew,
		RenewEntries: c.RenewEntries + d.RenewEntries,
		Inspect:      c.Inspect + d.Inspect,
		ForceRelease: c.ForceRelease + d.ForceRelease,
		Subscribe:    c.Subscribe + d.Subscribe,
		Dequeue:      c.Dequeue + d.Dequeue,
		HandOff:      c.HandOff + d.HandOff,
	}
}

// A Counter is a locker.Locker that counts the calls to the Locker it wraps, then makes them. It
// is safe for concurrent use.
type Counter struct {
	locker.Locker
	acquire, release, renew, renewEntries, inspect, force, subscribe, dequeue, handOff atomic.Int64
}

// Backend returns the Counter as a Client should be given it: a locker.Semaphorer (of a Granter
// and HandOffer), a locker.Granter, a locker.HandOffer or a locker.KindLocker (with counted
// SubscribeAs, HandOff and Dequeue) when the Locker it wraps is one, so that the Client's grants, hand-offs, RLock and WithFair work
// through it, and the Counter itself otherwise, so that they are refused as the wrapped Locker
// would have them refused.
func (c *Counter) Backend() locker.Locker {
	k, kinds := c.Locker.(locker.KindLocker)
	g, grants := c.Locker.(locker.Granter)
	h, hands := c.Locker.(locker.HandOffer)
	s, sems := c.Locker.(locker.Semaphorer)
	switch {
	case grants && hands && sems:
		return semaphoreCounter{grantHandOffCounter{grantCounter{kindCounter{c, k}, g}, handOffs{c, h}}, s}
	case grants && hands:
		return grantHandOffCounter{grantCounter{kindCounter{c, k}, g}, handOffs{c, h}}
	case grants:
		return grantCounter{kindCounter{c, k}, g}
	case hands:
		return handOffCounter{kindCounter{c, k}, handOffs{c, h}}
	case kinds:
		return kindCounter{c, k}
	}
	return c
}

// handOffs counts and makes the HandOff calls of a locker.HandOffer.
type handOffs struct {
	c *Counter
	h locker.HandOffer
}

func (h handOffs) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	h.c.handOff.Add(1)
	return h.h.HandOff(ctx, req)
}

// handOffCounter is a Counter of a locker.HandOffer.
type handOffCounter struct {
	kindCounter
	handOffs
}

// grantCounter is a Counter of a locker.Granter; SubscribeAs counts as a Subscribe.
type grantCounter struct {
	kindCounter
	grants locker.Granter
}

func (g grantCounter) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	g.subscribe.Add(1)
	return g.grants.SubscribeAs(ctx, key, owner)
}

// grantHandOffCounter is a Counter of a locker.Granter that is a locker.HandOffer too.
type grantHandOffCounter struct {
	grantCounter
	handOffs
}

// semaphoreCounter is a Counter of a locker.Semaphorer that is a locker.Granter and a
// locker.HandOffer too (as every backend of this module with semaphores is).
type semaphoreCounter struct {
	grantHandOffCounter
	sems locker.Semaphorer
}

func (s semaphoreCounter) MaxLimit() int { return s.sems.MaxLimit() }

// kindCounter is a Counter of a locker.KindLocker.
type kindCounter struct {
	*Counter
	kinds locker.KindLocker
}

func (k kindCounter) Dequeue(ctx context.Context, key, owner string) error {
	k.dequeue.Add(1)
	return k.kinds.Dequeue(ctx, key, owner)
}

// Count returns a Counter around l.
func Count(l locker.Locker) *Counter { return &Counter{Locker: l} }

// Calls returns the counts so far.
func (c *Counter) Calls() Calls {
	return Calls{
		Acquire:      c.acquire.Load(),
		Release:      c.release.Load(),
		Renew:        c.renew.Load(),
		RenewEntries: c.renewEntries.Load(),
		Inspect:      c.inspect.Load(),
		ForceRelease: c.force.Load(),
		Subscribe:    c.subscribe.Load(),
		Dequeue:      c.dequeue.Load(),
		HandOff:      c.handOff.Load(),
	}
}

func (c *Counter) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	c.acquire.Add(1)
	return c.Locker.Acquire(ctx, req)
}

func (c *Counter) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	c.release.Add(1)
	return c.Locker.Release(ctx, req)
}

func (c *Counter) Renew(ctx context.Context, batch []locker.Renewal) []error {
	c.renew.Add(1)
	c.renewEntries.Add(int64(len(batch)))
	return c.Locker.Renew(ctx, batch)
}

func (c *Counter) Inspect(ctx context.Context, key string) (locker.State, error) {
	c.inspect.Add(1)
	return c.Locker.Inspect(ctx, key)
}

func (c *Counter) ForceRelease(ctx context.Context, key string) (bool, error) {
	c.force.Add(1)
	return c.Locker.ForceRelease(ctx, key)
}

func (c *Counter) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	c.subscribe.Add(1)
	return c.Locker.Subscribe(ctx, key)
}
