package backend_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// blackholeTrials is how many holders of each driver go through a partition: half with no
// latency on their link, half with 30ms each way, at phases spread over a renewal interval. They
// run at once, each behind a proxy of its own.
const blackholeTrials = 8

// A black hole between a holder and the server (a partition: connections stay open, nothing
// gets through, renewals go unanswered) ends the holder's lease context with cause ErrLockLost
// before the lease can have expired on the server, for every driver, with and without latency
// on the link, whatever the phase of the renewal cycle the partition starts in.
//
// The server's expiry is read right after the black hole starts: from then on nothing reaches
// the server but, at most, a renewal already on its way, which only moves the expiry later. So
// the read's send time plus the PTTL it reports is a lower bound of the expiry.
//
// Two moments are compared with it. The moment the Client decided the context ends — when the
// lease may have expired by its own clock, which the watchdog also gives as the deadline of the
// renewal the partition swallowed — must be before it, in every trial. The moment the test sees
// the context end is that decision plus however late the Go scheduler runs the watchdog's
// timer: on an idle machine a millisecond or two, well inside the margin of 1% + 2ms; on a
// saturated one, tens of milliseconds, which for this 1s TTL can be past the server's expiry.
// That lateness is bounded loosely (it is the machine, not the lock) and reported in the log,
// with the trials in which the key was already gone when the test saw the context end.
func TestBlackholeEndsLeaseBeforeExpiry(t *testing.T) {
	const ttl = time.Second
	forEachDriver(t, func(t *testing.T, d driver) {
		f := startFaulty(t)
		var decided, seen, late, stalled stats
		names := make([]string, blackholeTrials)
		for i := range names {
			names[i] = fmt.Sprint(i)
		}
		concurrently(t, names, func(t *testing.T, i int) {
			latency := time.Duration(0)
			if i%2 == 1 {
				latency = 30 * time.Millisecond
			}
			// After at least one renewal, and spread over one renewal interval (TTL/3).
			phase := ttl/2 + time.Duration(i/2)*ttl/3/(blackholeTrials/2)
			for attempt := range 3 {
				key := fmt.Sprintf("blackhole:%s:%d:%d", d.name, i, attempt)
				r, ok := blackholeTrial(t, f.withProxy(t), d, key, ttl, latency, phase)
				if !ok {
					stalled.add(0, false)
					continue
				}
				decided.add(r.decided, r.decided <= 0)
				seen.add(r.seen, r.seen <= 0 || r.leftAtEnd <= 0)
				late.add(r.late, false)
				return
			}
			t.Fatalf("3 attempts in a row lost their lease before the partition: the machine is too slow to renew a %v lease", ttl)
		})
		t.Logf("the Client's decision to end the lease came before the server's expiry by: %v", &decided)
		t.Logf("the test saw the lease context end before the server's expiry by: %v (a violation here is scheduler lateness)", &seen)
		t.Logf("the test saw the context end after the Client's validity ran out by: %v", &late)
		if stalled.trials > 0 {
			t.Logf("%d attempts lost their lease before the partition, to renewals that came back too late (a stalled machine), and were made again", stalled.trials)
		}
	})
}

// renewWatch is a backend that remembers the deadline of the latest Renew call: the watchdog
// bounds a renewal by the moment the lease may have expired by the Client's clock, which is
// when it ends the lease's context if the renewal does not come back.
type renewWatch struct {
	locker.Locker
	mu       sync.Mutex
	deadline time.Time
}

func (r *renewWatch) Renew(ctx context.Context, batch []locker.Renewal) []error {
	d, _ := ctx.Deadline()
	r.mu.Lock()
	r.deadline = d
	r.mu.Unlock()
	return r.Locker.Renew(ctx, batch)
}

func (r *renewWatch) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadline
}

// blackholeResult is what one black-hole trial measured, relative to (a lower bound of) the
// server's expiry of the lease.
type blackholeResult struct {
	decided   time.Duration // how long before it the Client's validity ran out
	seen      time.Duration // how long before it the test saw the lease context end
	leftAtEnd int64         // the server's PTTL when the test saw the context end
	late      time.Duration // how long after the Client's validity ran out the test saw the end
}

// blackholeTrial holds key with a backend of d through f's proxy with latency on it,
// black-holes the proxy after phase, and measures when the lease ends against the server's
// expiry. It reports false, without a measurement, when the lease was lost before the partition
// because its renewals came back too late (see goneWatch).
func blackholeTrial(t *testing.T, f *faulty, d driver, key string, ttl, latency, phase time.Duration) (blackholeResult, bool) {
	t.Helper()
	defer f.healAndReset()
	gw := &goneWatch{Locker: f.backend(t, d)}
	b := &renewWatch{Locker: gw}
	f.proxy.SetLatency(latency)
	c := locker.New(b, locker.WithTTL(ttl))
	defer c.Close()
	l, _ := lockWithin(t, c, key, 5*time.Second)
	time.Sleep(phase) // not a synchronisation: where in the renewal cycle the partition starts
	if err := l.Context().Err(); err != nil {
		if gw.foundGone(key) || !errors.Is(context.Cause(l.Context()), locker.ErrLockLost) {
			t.Fatalf("%s: the lease ended before the fault (latency %v): %v; holds on the server: %v",
				key, latency, context.Cause(l.Context()), holdsOn(t, f.srv, key))
		}
		t.Logf("%s: the lease was lost before the partition: its renewals came back too late", key)
		_ = l.Unlock()
		return blackholeResult{}, false
	}

	f.proxy.Blackhole()
	expires := expiryAtLeast(t, f, key)
	var ended time.Time
	select {
	case <-l.Context().Done():
		ended = time.Now()
	case <-time.After(time.Until(expires) + time.Second):
		t.Fatalf("%s: the lease context was still live 1s after the server's expiry", key)
	}
	r := blackholeResult{leftAtEnd: pttl(t, f.srv, key), seen: expires.Sub(ended)}
	if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
		t.Fatalf("%s: lease context cause %v, want ErrLockLost", key, cause)
	}
	validUntil := b.last()
	r.decided, r.late = expires.Sub(validUntil), ended.Sub(validUntil)
	if r.decided <= 0 {
		t.Errorf("%s (latency %v, phase %v): the Client took the lease as valid until %v after the server's expiry (at the latest)",
			key, latency, phase, -r.decided)
	}
	if r.late > 250*time.Millisecond {
		t.Errorf("%s: the lease context ended %v after the Client's validity ran out", key, r.late)
	}
	f.healAndReset()
	// The hold may still be on the server, or have expired: either answer is right.
	if err := l.Unlock(); err != nil && !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("%s: Unlock after the partition: %v", key, err)
	}
	return r, true
}

// expiryAtLeast returns a lower bound of when key expires on the server, whose expiry may only
// move later from now on: the send time of a PTTL read plus the PTTL. It reads twice and keeps
// the better bound (a read delayed by a busy machine gives a loose one).
func expiryAtLeast(t *testing.T, f *faulty, key string) time.Time {
	t.Helper()
	var best time.Time
	for range 2 {
		sent := time.Now()
		left := pttl(t, f.srv, key)
		if left <= 0 {
			t.Fatalf("%s: PTTL %d during the partition, with a live lease", key, left)
		}
		if e := sent.Add(time.Duration(left) * time.Millisecond); e.After(best) {
			best = e
		}
	}
	return best
}
