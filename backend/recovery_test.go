package backend_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/faultproxy"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A waiter cut off from the server while the holder releases gets the lock soon after the fault
// ends, not a holder's TTL later, for every driver. The holder (5s TTL, directly on the server)
// releases while the waiter, behind the proxy, waits with a retry an hour away, so that only
// its driver and the Backend's notices can wake it:
//   - reset: the proxy resets the waiter's connections (its subscription's too), then the
//     holder releases: the waiter must get the lock within 1.5s of the release.
//   - blackhole: the proxy black-holes the waiter's connections, the holder releases (the notice
//     is lost), and the partition heals (its connections reset): the waiter must get the lock
//     within 1.5s of the heal.
func TestWaiterAfterFault(t *testing.T) {
	const (
		trials = 5 // per driver and fault
		limit  = 1500 * time.Millisecond
	)
	forEachDriver(t, func(t *testing.T, d driver) {
		f := startFaulty(t)
		holder := locker.New(f.direct(t, d), locker.WithTTL(5*time.Second))
		defer holder.Close()
		w := &refusals{Locker: f.backend(t, d), seen: make(chan struct{}, 64)}
		waiter := locker.New(w)
		defer waiter.Close()
		got := map[string]*stats{"reset": {}, "blackhole": {}}
		for i := range trials {
			for _, fault := range []string{"reset", "blackhole"} {
				key := fmt.Sprintf("recover:%s:%s:%d", d.name, fault, i)
				held, _ := lockWithin(t, holder, key, 5*time.Second)
				for len(w.seen) > 0 {
					<-w.seen
				}
				granted := waitBehind(t, waiter, w, key)
				var since time.Time
				if fault == "reset" {
					f.proxy.Reset()
					since = time.Now()
					if err := held.Unlock(); err != nil {
						t.Fatal(err)
					}
				} else {
					f.proxy.Blackhole()
					if err := held.Unlock(); err != nil {
						t.Fatal(err)
					}
					since = time.Now()
					f.healAndReset()
				}
				select {
				case g := <-granted:
					if g.err != nil {
						t.Fatalf("%s: the waiter after the %s: %v", key, fault, g.err)
					}
					took := g.at.Sub(since)
					got[fault].add(took, took > limit)
					if took > limit {
						t.Errorf("%s: the waiter got the lock %v after the %s ended, want within %v", key, took, fault, limit)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the waiter did not get the lock within 10s of the %s", key, fault)
				}
			}
		}
		for _, fault := range []string{"reset", "blackhole"} {
			t.Logf("%s: waiter granted after a %s within: %v", d.name, fault, got[fault])
		}
	})
}

// grant is how a waiter's Lock ended: when it was granted, with which fencing token, and its
// Unlock's error (or the Lock's error, with a zero time).
type grant struct {
	at    time.Time
	token uint64
	err   error
}

// waitBehind starts a Lock of key by waiter (whose backend w reports refusals) that only a
// notice or its driver can wake (retry an hour away), returns once it waits, and then reports
// how it ended on the channel (it unlocks at once when granted).
func waitBehind(t *testing.T, waiter *locker.Client, w *refusals, key string) <-chan grant {
	t.Helper()
	done := make(chan grant, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := waiter.Lock(ctx, key, locker.WithRetry(locker.LinearBackoff(time.Hour)))
		if err != nil {
			done <- grant{err: err}
			return
		}
		at := time.Now()
		done <- grant{at, l.Token(), l.Unlock()}
	}()
	for range 2 { // refused before subscribing, and after: now it waits
		select {
		case <-w.seen:
		case g := <-done:
			t.Fatalf("%s: the waiter stopped before waiting: %v", key, g.err)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the waiter did not wait within 5s", key)
		}
	}
	return done
}

// Latency on every link (20, 35 and 50ms each way, one per driver) changes nothing for
// exclusion: workers of every driver, two Clients each, take turns on one key with critical
// sections that mostly outlast the renewal interval, and never two are inside at once; and no
// lease is lost to latency (a round trip of 100ms at most, against a 1.5s TTL). A lease lost
// because its renewals came back too late (see goneWatch) is reported, not failed: that is the
// machine stalling, and the safe way for the Client to fail.
func TestExclusionUnderLatency(t *testing.T) {
	const (
		ttl    = 1500 * time.Millisecond
		rounds = 2
	)
	srv := redistest.StartServer(t)
	var (
		inside     atomic.Int32
		violations atomic.Int32
		stalled    atomic.Int32
		sections   atomic.Int32
		wg         sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "latency:exclusion"
	for i, d := range drivers {
		p := faultproxy.Start(t, srv.Addr)
		p.SetLatency(time.Duration(20+15*i) * time.Millisecond)
		b := d.new(t, p.Addr())
		for w := range 2 {
			gw := &goneWatch{Locker: b}
			c := locker.New(gw, locker.WithTTL(ttl))
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			wg.Go(func() {
				for range rounds {
					l, err := c.Lock(ctx, key)
					if err != nil {
						t.Errorf("%s: %v", d.name, err)
						return
					}
					if n := inside.Add(1); n != 1 {
						violations.Add(1)
						t.Errorf("%s: %d holders inside at once", d.name, n)
					}
					sections.Add(1)
					// Longer than the renewal interval (TTL/3) most of the time.
					work := time.Duration(200+rng.IntN(500)) * time.Millisecond
					lost := false
					select {
					case <-time.After(work):
					case <-l.Context().Done():
						lost = true
						if gw.foundGone(key) {
							t.Errorf("%s: lease lost under latency: a renewal found the hold gone", d.name)
						} else {
							stalled.Add(1)
							t.Logf("%s: lease lost: its renewals came back too late (%v)", d.name, context.Cause(l.Context()))
						}
					}
					inside.Add(-1)
					if err := l.Unlock(); err != nil && !(lost && errors.Is(err, locker.ErrNotHeld)) {
						t.Errorf("%s: %v", d.name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d critical sections under latency: %d exclusion violations, %d leases lost to a stalled machine", sections.Load(), violations.Load(), stalled.Load())
}
