package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/hashlock/locker"
)

// errInjected is the failure a probe returns for renewals while failRenew is set.
var errInjected = errors.New("conformance: injected renewal failure")

// probe wraps the backend under test: it counts calls, records renewal batches, can make
// renewals fail (a network partition as the Client sees it), and signals refusals.
type probe struct {
	locker.Locker

	mu        sync.Mutex
	calls     map[string]int
	batches   []int // size of every Renew batch
	failRenew bool
	refused   chan string // receives the key of every refused Acquire, when not nil
}

func newProbe(b locker.Locker) *probe {
	return &probe{Locker: b, calls: make(map[string]int)}
}

func (p *probe) count(op string) {
	p.mu.Lock()
	p.calls[op]++
	p.mu.Unlock()
}

// total returns the number of calls of op, or of every method when op is "".
func (p *probe) total(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op != "" {
		return p.calls[op]
	}
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

func (p *probe) renewBatches() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.batches...)
}

func (p *probe) setFailRenew(fail bool) {
	p.mu.Lock()
	p.failRenew = fail
	p.mu.Unlock()
}

// watchRefusals makes the probe report refused Acquires on the returned channel.
func (p *probe) watchRefusals() <-chan string {
	ch := make(chan string, 1024)
	p.mu.Lock()
	p.refused = ch
	p.mu.Unlock()
	return ch
}

func (p *probe) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (locker.Acquisition, error) {
	p.count("Acquire")
	a, err := p.Locker.Acquire(ctx, key, owner, ttl)
	if err == nil && !a.Acquired() {
		p.mu.Lock()
		ch := p.refused
		p.mu.Unlock()
		if ch != nil {
			select {
			case ch <- key:
			default:
			}
		}
	}
	return a, err
}

func (p *probe) Release(ctx context.Context, key, owner string) (int, error) {
	p.count("Release")
	return p.Locker.Release(ctx, key, owner)
}

func (p *probe) Renew(ctx context.Context, batch []locker.Renewal) []error {
	p.count("Renew")
	p.mu.Lock()
	p.batches = append(p.batches, len(batch))
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

func (p *probe) Inspect(ctx context.Context, key string) (locker.State, error) {
	p.count("Inspect")
	return p.Locker.Inspect(ctx, key)
}

func (p *probe) ForceRelease(ctx context.Context, key string) (bool, error) {
	p.count("ForceRelease")
	return p.Locker.ForceRelease(ctx, key)
}

func (p *probe) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	p.count("Subscribe")
	return p.Locker.Subscribe(ctx, key)
}

// namespace returns a fresh key prefix, so that cases never see each other's keys even on a
// shared server. It has no hash tag: on a Redis Cluster a case's keys spread over the slots.
func namespace() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "conformance:" + hex.EncodeToString(b[:]) + ":"
}
