package backend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
)

// takeBackTrials is how many times each scenario of abandoned acquires runs per driver.
const takeBackTrials = 4

// takeBackTTL is the lease of the abandoned acquires: a hold left behind would block the other
// owner for this long, and the tests want the key free within a small part of it.
const takeBackTTL = 10 * time.Second

// A Lock whose ctx ends while its acquire is in flight under a real fault leaves no hold behind:
// another owner gets the lock within a tenth of the TTL, for every driver, in four situations:
//   - blackhole: the acquire goes into a partition (it never reaches the server); the ctx is
//     cancelled (once) or its deadline passes (the trials); the partition heals. How long Lock
//     takes to return after the cancellation is logged: go-redis does not watch a ctx without
//     deadline while it waits for a reply, nor rueidis while it dials a connection, and both
//     return only at their own timeouts (about 5s).
//   - partition: the acquire runs on the server, then a partition swallows its reply and the
//     take-back that Lock sends when its ctx ends; the partition heals 20ms later. The Client
//     sends the take-back again while the backend is unavailable (go-redis also does it by
//     itself); before it did, the hold stayed for the whole TTL with rueidis and Redigo.
//   - lost replies: every reply to an acquire is lost (the first one took the lock); Lock keeps
//     sending it again until its ctx ends, then takes it back.
//   - late: the acquire is delayed on the wire past the end of the ctx, so that the take-back
//     may reach the server first; the acquire, arriving later, must then be refused (the
//     take-back leaves a tombstone). Whether that ordering was achieved is measured per trial
//     (the take-back finds nothing to take back) and logged. go-redis and Redigo drop the
//     acquire's connection when its ctx ends, so their take-back goes out on another one;
//     rueidis keeps the connection (it pipelines), and its take-back overtakes the acquire only
//     when it goes out on another of its pipelined connections.
func TestAbandonedAcquireTakenBack(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		f := startFaulty(t)
		other := locker.New(f.direct(t, d))
		defer other.Close()
		var waited stats
		// The cancelled Lock runs beside the other trials, behind a proxy of its own: a driver
		// may take seconds to notice the cancellation.
		concurrently(t, []string{"cancelled", "trials"}, func(t *testing.T, part int) {
			g := f.withProxy(t)
			b := newUndoWatch(g.backend(t, d))
			c := locker.New(b, locker.WithTTL(takeBackTTL))
			defer c.Close()
			if part == 0 {
				key := fmt.Sprintf("takeback:%s:cancelled", d.name)
				took := abandonInBlackhole(t, g, b, c, key, true)
				t.Logf("%s: Lock returned %v after its ctx was cancelled, its acquire waiting for a reply in a partition", d.name, took)
				waited.add(othersWait(t, other, key), false)
				return
			}
			var deadline stats
			orders := make(map[lateOrder]int)
			for i := range takeBackTrials {
				key := fmt.Sprintf("takeback:%s:%d", d.name, i)
				deadline.add(abandonInBlackhole(t, g, b, c, key+":blackhole", false), false)
				waited.add(othersWait(t, other, key+":blackhole"), false)

				abandonInPartition(t, g, b, c, key+":partition")
				waited.add(othersWait(t, other, key+":partition"), false)

				abandonWithRepliesLost(t, g, b, c, key+":dropped")
				waited.add(othersWait(t, other, key+":dropped"), false)

				orders[abandonLate(t, g, b, c, key+":late")]++
				waited.add(othersWait(t, other, key+":late"), false)
			}
			t.Logf("%s: Lock returned after its ctx's deadline passed, its acquire in a partition, within: %v", d.name, &deadline)
			t.Logf("%s: late acquires: %d reached the server after their take-back and were refused (its tombstone), %d before it, %d never",
				d.name, orders[undoFirst], orders[acquireFirst], orders[acquireLost])
		})
		t.Logf("%s: another owner got each abandoned key within: %v", d.name, &waited)
	})
}

// undoWatch is a backend that reports when an Acquire is sent, when a take-back (Release with
// Undo) is sent, and the outcome of every take-back attempt.
type undoWatch struct {
	locker.Locker
	acquired chan struct{}
	undoing  chan struct{}
	undone   chan undone
}

// undone is the outcome of one take-back.
type undone struct {
	key string
	err error
}

func (u *undoWatch) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	select {
	case u.acquired <- struct{}{}:
	default:
	}
	return u.Locker.Acquire(ctx, req)
}

func (u *undoWatch) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if req.Undo {
		select {
		case u.undoing <- struct{}{}:
		default:
		}
	}
	n, err := u.Locker.Release(ctx, req)
	if req.Undo {
		select {
		case u.undone <- undone{req.Key, err}:
		default: // never block the Client; drain empties the channel before each trial
		}
	}
	return n, err
}

func newUndoWatch(b locker.Locker) *undoWatch {
	return &undoWatch{Locker: b, acquired: make(chan struct{}, 16), undoing: make(chan struct{}, 16), undone: make(chan undone, 64)}
}

// drain empties the channels before a trial.
func (u *undoWatch) drain() {
	for {
		select {
		case <-u.acquired:
		case <-u.undoing:
		case <-u.undone:
		default:
			return
		}
	}
}

// takeBack waits for the outcome of the take-back of key: the first attempt that was not
// unavailable (the Client sends it again after those), skipping those of earlier trials' keys.
func (u *undoWatch) takeBack(t *testing.T, key string) error {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case u := <-u.undone:
			if u.key == key && !errors.Is(u.err, locker.ErrUnavailable) {
				return u.err
			}
		case <-timeout:
			t.Fatalf("%s: no take-back within 10s of the Lock giving up", key)
			return nil
		}
	}
}

// othersWait locks key with other (a Client connected directly to the server), failing unless it
// gets it within a second (a tenth of the abandoned acquire's TTL), and releases it; it returns
// how long the Lock took.
func othersWait(t *testing.T, other *locker.Client, key string) time.Duration {
	t.Helper()
	l, took := lockWithin(t, other, key, takeBackTTL/10)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	return took
}

// lockAsync runs c.Lock(ctx, key) in a goroutine and returns its error on the channel.
func lockAsync(c *locker.Client, ctx context.Context, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, key)
		if err == nil {
			err = errors.Join(errors.New("granted"), l.Unlock())
		}
		done <- err
	}()
	return done
}

// lockGaveUp waits for a Lock started by lockAsync to fail with an error wrapping want, and
// returns how long that took from since.
func lockGaveUp(t *testing.T, done <-chan error, key string, want error, since time.Time) time.Duration {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("%s: Lock = %v, want an error wrapping %v", key, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Lock still running 10s after its ctx ended", key)
	}
	return time.Since(since)
}

// abandonInBlackhole ends a Lock whose acquire went into a partition, then heals it; it returns
// how long Lock took to return after its ctx ended. When cancelled is set the ctx is cancelled
// once the acquire is on the wire, else it has a deadline 150ms away.
func abandonInBlackhole(t *testing.T, f *faulty, b *undoWatch, c *locker.Client, key string, cancelled bool) time.Duration {
	t.Helper()
	defer f.healAndReset()
	b.drain()
	f.proxy.Blackhole()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := context.Canceled
	if !cancelled {
		ctx, cancel = context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		want = context.DeadlineExceeded
	}
	done := lockAsync(c, ctx, key)
	<-b.acquired
	if cancelled {
		time.Sleep(20 * time.Millisecond) // not a synchronisation: the acquire is written meanwhile
		cancel()
	}
	<-ctx.Done()
	took := lockGaveUp(t, done, key, want, time.Now())
	f.healAndReset()
	return took
}

// abandonWithRepliesLost loses the reply to every acquire of a Lock (the first one takes the
// lock on the server) until its ctx ends, then lets the take-back through.
func abandonWithRepliesLost(t *testing.T, f *faulty, b *undoWatch, c *locker.Client, key string) {
	t.Helper()
	defer f.healAndReset()
	b.drain()
	before := f.proxy.Dropped()
	f.proxy.DropRepliesTo(rediscore.AcquireScript.SHA1, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := lockAsync(c, ctx, key)
	lockGaveUp(t, done, key, context.DeadlineExceeded, time.Now())
	f.proxy.DropRepliesTo("", 0)
	if f.proxy.Dropped() == before {
		t.Fatalf("%s: no acquire reply was lost: the fault did not fire", key)
	}
	if err := b.takeBack(t, key); err != nil {
		t.Fatalf("%s: the take-back of an acquire that took the lock: %v", key, err)
	}
	wantHolds(t, f.srv, key, 0, "after the take-back")
}

// abandonInPartition lets a Lock's acquire run on the server, then cuts the link before the
// reply comes back: the Lock's ctx ends, and its take-back goes into the partition too. The
// partition heals (its connections reset) just after.
func abandonInPartition(t *testing.T, f *faulty, b *undoWatch, c *locker.Client, key string) {
	t.Helper()
	defer f.healAndReset()
	warm(t, c, key)
	b.drain()
	f.proxy.SetLatency(100 * time.Millisecond) // the reply is on its way for 100ms: time to cut it off
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	done := lockAsync(c, ctx, key)
	waitUntil(t, 2*time.Second, key+": the acquire running on the server", func() bool {
		return len(holdsOn(t, f.srv, key)) == 1
	})
	f.proxy.Blackhole()
	lockGaveUp(t, done, key, context.DeadlineExceeded, time.Now())
	select {
	case <-b.undoing:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no take-back within 5s of the Lock giving up", key)
	}
	time.Sleep(20 * time.Millisecond) // not a synchronisation: the take-back is written into the partition
	f.healAndReset()
}

// warm makes c's driver open its connections through the proxy, so that the next command goes
// out at once on one of them even with latency on the link (rueidis spreads commands over
// several connections, each dialled on first use). The first use of a connection that an
// earlier Reset broke fails as unavailable.
func warm(t *testing.T, c *locker.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 32 {
		if _, err := c.Inspect(ctx, key); err != nil && !errors.Is(err, locker.ErrUnavailable) {
			t.Fatal(err)
		}
	}
}

// lateOrder is the order in which a late acquire and its take-back reached the server.
type lateOrder int

const (
	acquireFirst lateOrder = iota // the take-back removed the hold the acquire had added
	undoFirst                     // the take-back left a tombstone, and the acquire was refused
	acquireLost                   // the take-back found nothing, and the acquire never ran
)

// abandonLate delays a Lock's acquire on the wire past the end of its ctx and lets the take-back
// through at once, then waits until the acquire has run on the server (or surely never will).
// It reports the order in which they reached the server.
func abandonLate(t *testing.T, f *faulty, b *undoWatch, c *locker.Client, key string) lateOrder {
	t.Helper()
	defer f.healAndReset()
	warm(t, c, key)
	b.drain()
	calls := evalshaCalls(t, f.srv)
	const delay = 500 * time.Millisecond
	f.proxy.SetLatency(delay)
	lctx, lcancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer lcancel()
	done := lockAsync(c, lctx, key)
	<-b.acquired
	sent := time.Now()
	// Not a synchronisation: give the proxy a moment to read the acquire (it then keeps its
	// delay), and lift the latency well before the Lock gives up and sends the take-back. If the
	// moment is missed, the acquire simply arrives first: the trial still checks the outcome.
	time.Sleep(50 * time.Millisecond)
	f.proxy.SetLatency(0)
	lockGaveUp(t, done, key, context.DeadlineExceeded, time.Now())
	undoErr := b.takeBack(t, key)
	order := acquireFirst
	if errors.Is(undoErr, locker.ErrNotHeld) {
		order = undoFirst
	} else if undoErr != nil {
		t.Fatalf("%s: take-back: %v", key, undoErr)
	}
	// The acquire has run once the server counts two more scripts (it and the take-back). A
	// driver that had to dial a connection for it gave up during the handshake: then it never
	// runs, which the count shows once the delay is well over.
	for evalshaCalls(t, f.srv) < calls+2 {
		if time.Since(sent) > delay+time.Second {
			if order != undoFirst {
				t.Fatalf("%s: the take-back removed a hold, but the server ran no acquire", key)
			}
			order = acquireLost
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantHolds(t, f.srv, key, 0, "after the late acquire and its take-back")
	return order
}
