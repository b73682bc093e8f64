package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/callcount"
)

// errInjected is the failure a probe returns for renewals while failRenew is set.
var errInjected = errors.New("conformance: injected renewal failure")

// errLostReply is the failure of a call whose reply a probe dropped: the backend unavailable.
var errLostReply = fmt.Errorf("conformance: injected lost reply: %w", locker.ErrUnavailable)

// errUnreachable is a driver's own error for a backend that cannot be reached.
var errUnreachable = errors.New("conformance: injected connection refused")

// probe wraps the backend under test: it counts the calls (callcount), then passes them to
// faults, which records renewal batches, can make renewals fail (a network partition as the
// Client sees it) or lose replies, and signals refusals. A step that calls probe.faults directly
// is not counted.
type probe struct {
	*callcount.Counter
	faults *faults
}

func newProbe(b locker.Locker) *probe {
	f := &faults{Locker: b}
	_, sems := b.(locker.Semaphorer)
	if _, ok := b.(locker.Granter); ok && sems {
		return &probe{Counter: callcount.Count(semaphoreFaults{grantFaults{f}}), faults: f}
	}
	if _, ok := b.(locker.Granter); ok {
		return &probe{Counter: callcount.Count(grantFaults{f}), faults: f}
	}
	return &probe{Counter: callcount.Count(f), faults: f}
}

// total returns the number of calls of op, or of every method when op is "".
func (p *probe) total(op string) int {
	c := p.Calls()
	n := map[string]int64{
		"": c.RoundTrips(), "Acquire": c.Acquire, "Release": c.Release, "Renew": c.Renew,
		"Inspect": c.Inspect, "ForceRelease": c.ForceRelease, "Subscribe": c.Subscribe,
		"Dequeue": c.Dequeue, "HandOff": c.HandOff,
	}[op]
	return int(n)
}

// faults is the backend under test with the failures a step injects.
type faults struct {
	locker.Locker

	mu        sync.Mutex
	batches   []int       // size of every Renew batch
	renewals  []time.Time // when every Renew call was made
	failRenew bool
	down      bool        // every Acquire fails at once, unavailable (errUnreachable), until cleared
	refused   chan string // receives the key of every refused Acquire, when not nil
	queued    chan string // receives the owner of every refused Acquire with Wait, when not nil
	dequeued  chan string // receives the owner of every Dequeue call once it returned, when not nil
	lost      map[string]*lostReplies
	longest   time.Duration // the longest Acquire or subscription since the last takeLongest
}

// lostReplies makes calls of one method take effect on the backend and then fail, as if the
// reply had been lost on the way back.
type lostReplies struct {
	n       int           // how many calls are still to lose their replies
	err     error         // the error they return; nil: wait for ctx to end, and return its error
	applied chan struct{} // receives after each such call took effect
}

// loseReplies makes the next n calls of op ("Acquire" or "Release") take effect on the backend
// and then fail with err, or, when err is nil, wait until their ctx ends and return its error (a
// reply that does not come). It returns a channel that receives after each took effect.
func (p *faults) loseReplies(op string, n int, err error) <-chan struct{} {
	l := &lostReplies{n: n, err: err, applied: make(chan struct{}, n)}
	p.mu.Lock()
	if p.lost == nil {
		p.lost = make(map[string]*lostReplies)
	}
	p.lost[op] = l
	p.mu.Unlock()
	return l.applied
}

// loseReply returns the error to report instead of the reply of a call of op that took effect,
// or nil to report the reply.
func (p *faults) loseReply(ctx context.Context, op string) error {
	p.mu.Lock()
	l := p.lost[op]
	if l == nil || l.n == 0 {
		p.mu.Unlock()
		return nil
	}
	l.n--
	p.mu.Unlock()
	l.applied <- struct{}{}
	if l.err != nil {
		return l.err
	}
	<-ctx.Done()
	return ctx.Err()
}

// renewTimes returns when every Renew call was made, in order.
func (p *faults) renewTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.renewals...)
}

func (p *faults) renewBatches() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.batches...)
}

func (p *faults) setFailRenew(fail bool) {
	p.mu.Lock()
	p.failRenew = fail
	p.mu.Unlock()
}

// watchRefusals makes the probe report refused Acquires on the returned channel.
func (p *faults) watchRefusals() <-chan string {
	ch := make(chan string, 1024)
	p.mu.Lock()
	p.refused = ch
	p.mu.Unlock()
	return ch
}

// setDown makes every Acquire fail at once, without reaching the backend, as on a server that
// refuses connections, until setDown(false).
func (p *faults) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// took records how long a call that a waiting Lock makes in line (Acquire, a subscription) took
// since start.
func (p *faults) took(start time.Time) {
	d := time.Since(start)
	p.mu.Lock()
	p.longest = max(p.longest, d)
	p.mu.Unlock()
}

// takeLongest returns the longest Acquire or subscription since the last call, and starts over.
func (p *faults) takeLongest() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.longest
	p.longest = 0
	return d
}

func (p *faults) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	defer p.took(time.Now())
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		return locker.Acquisition{}, fmt.Errorf("%w: %w", locker.ErrUnavailable, errUnreachable)
	}
	a, err := p.Locker.Acquire(ctx, req)
	if err == nil {
		if lost := p.loseReply(ctx, "Acquire"); lost != nil {
			return locker.Acquisition{}, lost
		}
	}
	if err == nil && !a.Acquired() {
		p.mu.Lock()
		ch, queued := p.refused, p.queued
		p.mu.Unlock()
		signal(ch, req.Key)
		if req.Wait > 0 {
			signal(queued, req.Owner)
		}
	}
	return a, err
}

// signal sends v on ch, if ch is not nil and has room.
func signal(ch chan string, v string) {
	if ch != nil {
		select {
		case ch <- v:
		default:
		}
	}
}

// watchQueued makes the probe report the owner of every refused Acquire with a Wait (one that
// may have left a queue entry) on the returned channel.
func (p *faults) watchQueued() <-chan string {
	ch := make(chan string, 1024)
	p.mu.Lock()
	p.queued = ch
	p.mu.Unlock()
	return ch
}

// watchDequeued makes the probe report the owner of every Dequeue call, once it returned.
func (p *faults) watchDequeued() <-chan string {
	ch := make(chan string, 1024)
	p.mu.Lock()
	p.dequeued = ch
	p.mu.Unlock()
	return ch
}

// Dequeue passes the call to the backend, which must be a locker.KindLocker.
func (p *faults) Dequeue(ctx context.Context, key, owner string) error {
	q, ok := p.Locker.(locker.KindLocker)
	if !ok {
		return fmt.Errorf("conformance: Dequeue on a backend that is no locker.KindLocker: %w", errors.ErrUnsupported)
	}
	err := q.Dequeue(ctx, key, owner)
	p.mu.Lock()
	ch := p.dequeued
	p.mu.Unlock()
	signal(ch, owner)
	return err
}

// kindProbe is a probe that is a locker.KindLocker, for a backend that is one.
type kindProbe struct{ *probe }

// Dequeue passes the call on to the backend.
func (p kindProbe) Dequeue(ctx context.Context, key, owner string) error {
	return p.faults.Dequeue(ctx, key, owner)
}

// HandOff passes the call to the backend, which must be a locker.HandOffer; a lost reply
// (loseReplies("HandOff", …)) is one whose hand-off took effect.
func (p *faults) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	h, ok := p.Locker.(locker.HandOffer)
	if !ok {
		return locker.HandOffResult{}, fmt.Errorf("conformance: HandOff on a backend that is no locker.HandOffer: %w", errors.ErrUnsupported)
	}
	res, err := h.HandOff(ctx, req)
	if err == nil {
		if lost := p.loseReply(ctx, "HandOff"); lost != nil {
			return locker.HandOffResult{}, lost
		}
	}
	return res, err
}

func (p *faults) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	n, err := p.Locker.Release(ctx, req)
	if err == nil {
		if lost := p.loseReply(ctx, "Release"); lost != nil {
			return 0, lost
		}
	}
	return n, err
}

func (p *faults) Renew(ctx context.Context, batch []locker.Renewal) []error {
	p.mu.Lock()
	p.batches = append(p.batches, len(batch))
	p.renewals = append(p.renewals, time.Now())
	fail := p.failRenew
	p.mu.Unlock()
	if fail {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = errInjected
		}
		return errs
	}
	return p.Locker.Renew(ctx, batch)
}

func (p *faults) Inspect(ctx context.Context, key string) (locker.State, error) {
	return p.Locker.Inspect(ctx, key)
}

func (p *faults) ForceRelease(ctx context.Context, key string) (bool, error) {
	return p.Locker.ForceRelease(ctx, key)
}

func (p *faults) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	defer p.took(time.Now())
	return p.Locker.Subscribe(ctx, key)
}

// grantFaults is faults of a locker.Granter: it is one too.
type grantFaults struct{ *faults }

func (p grantFaults) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	defer p.took(time.Now())
	return p.Locker.(locker.Granter).SubscribeAs(ctx, key, owner)
}

// semaphoreFaults is grantFaults of a locker.Semaphorer: it is one too.
type semaphoreFaults struct{ grantFaults }

func (p semaphoreFaults) MaxLimit() int { return p.Locker.(locker.Semaphorer).MaxLimit() }

// namespace returns a fresh key prefix, so that cases never see each other's keys even on a
// shared server. It has no hash tag: on a Redis Cluster a case's keys spread over the slots.
func namespace() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "conformance:" + hex.EncodeToString(b[:]) + ":"
}
