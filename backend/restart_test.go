package backend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// restartTrials is how many restarts each driver goes through per persistence mode.
const restartTrials = 2

// restartTTL is the holder's lease in the restart tests: long enough that a lease survives the
// outage (300ms plus the server's start), short enough that a lost one is noticed soon.
const restartTTL = 3 * time.Second

// A server killed (SIGKILL) and restarted on the same port, with a holder and a waiter of every
// driver connected through the proxy, without persistence and with an append-only file:
//
//   - The waiter keeps waiting through the outage (Lock retries an unavailable server) and gets
//     the lock within 1s once it is free: at once after a restart that lost the data; with AOF,
//     once the holder, whose hold survived, unlocks (after the waiter's subscription is back).
//   - The holder learns of the loss when the data is gone: its lease context ends with
//     ErrLockLost within a renewal interval (TTL/3), a retry (TTL/10) and 500ms of the restart.
//     With AOF its lease survives: the context stays live, the server still has the hold, and a
//     renewal after the restart reset its lease; the waiter's fencing token is above the
//     holder's (the counter is in the AOF too).
//   - Every operation (lock, re-entry, inspect, refusal, unlock, renewal, forced unlock, notice)
//     works afterwards on the holder's backend, whose connections lived through the restart,
//     with the script cache flushed between the steps (exercise).
func TestServerRestart(t *testing.T) {
	var names []string
	for _, mode := range []string{"no-persistence", "aof"} {
		for _, d := range drivers {
			names = append(names, d.name+"/"+mode)
		}
	}
	concurrently(t, names, func(t *testing.T, i int) {
		d, aof, name := drivers[i%len(drivers)], i >= len(drivers), names[i]
		var opts []redistest.Option
		if aof {
			opts = append(opts, redistest.WithAOF())
		}
		f := startFaulty(t, opts...)
		hb := f.backend(t, d)
		w := &refusals{Locker: f.backend(t, d), seen: make(chan struct{}, 64)}
		var waited, noticed, overlap stats
		for trial := range restartTrials {
			key := fmt.Sprintf("restart:%s:%d", name, trial)
			wait, notice := restartTrial(t, f, hb, w, key, aof)
			waited.add(wait, false)
			if notice > 0 {
				noticed.add(notice, false)
				overlap.add(notice-wait, false)
			}
			flush := func() { f.srv.Do(t, "SCRIPT", "FLUSH") }
			exercise(t, func() locker.Locker { return hb }, key+":after", flush)
		}
		if aof {
			t.Logf("%s: the waiter got the lock within %v of the holder's Unlock", name, &waited)
			return
		}
		t.Logf("%s: the waiter got the lock within %v of the restart; the holder's lease ended within %v of it", name, &waited, &noticed)
		t.Logf("%s: both held the lock (the data was lost) for: %v", name, &overlap)
	})
}

// restartTrial runs one restart of f's server with a holder (on hb) and a waiter (on w) of key.
// It returns how long the waiter took to get the lock once it was free and, without
// persistence, how long the holder took to learn that its lease was lost.
func restartTrial(t *testing.T, f *faulty, hb locker.Locker, w *refusals, key string, aof bool) (wait, lost time.Duration) {
	t.Helper()
	holder := locker.New(hb, locker.WithTTL(restartTTL), locker.WithFencing())
	defer holder.Close()
	waiter := locker.New(w, locker.WithFencing())
	defer waiter.Close()
	held, _ := lockWithin(t, holder, key, 5*time.Second)
	for len(w.seen) > 0 {
		<-w.seen
	}
	granted := waitBehind(t, waiter, w, key)

	f.srv.Stop()
	time.Sleep(300 * time.Millisecond) // not a synchronisation: the outage
	select {
	case g := <-granted:
		t.Fatalf("%s: the waiter's Lock ended during the outage: %v", key, g.err)
	default:
	}
	f.srv.Restart(t)
	restarted := time.Now()

	if !aof {
		g := waitGrant(t, granted, key)
		if wait = g.at.Sub(restarted); wait > time.Second {
			t.Errorf("%s: the waiter got the lock %v after the restart lost the data, want within 1s", key, wait)
		}
		limit := restartTTL/3 + restartTTL/10 + 500*time.Millisecond
		select {
		case <-held.Context().Done():
			lost = time.Since(restarted)
		case <-time.After(time.Until(restarted.Add(limit))):
			t.Fatalf("%s: the holder's lease context was still live %v after a restart that lost its hold", key, limit)
		}
		if cause := context.Cause(held.Context()); !errors.Is(cause, locker.ErrLockLost) {
			t.Fatalf("%s: the holder's lease ended with %v, want ErrLockLost", key, cause)
		}
		if err := held.Unlock(); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("%s: the holder's Unlock after the loss: %v, want ErrNotHeld", key, err)
		}
		// The fencing counter was lost with the data: tokens start again (see the report).
		t.Logf("%s: fencing token %d before the restart, %d after it (no persistence)", key, held.Token(), g.token)
		return wait, lost
	}

	wantHolds(t, f.srv, key, 1, "right after a restart with AOF")
	// Longer than a renewal interval plus a retry: the holder must have renewed on the
	// restarted server, and the waiter must still wait.
	select {
	case g := <-granted:
		t.Fatalf("%s: the waiter got the lock (%v) while the holder's hold survived the restart", key, g.err)
	case <-held.Context().Done():
		t.Fatalf("%s: the holder's lease ended after a restart that kept its hold: %v", key, context.Cause(held.Context()))
	case <-time.After(restartTTL/3 + restartTTL/10 + 500*time.Millisecond):
	}
	wantHolds(t, f.srv, key, 1, "a renewal interval after a restart with AOF")
	if left := pttl(t, f.srv, key); left < restartTTL.Milliseconds()/2 {
		t.Fatalf("%s: PTTL %dms: the holder did not renew its lease on the restarted server", key, left)
	}
	channel := rediscore.Channel(key)
	waitUntil(t, 5*time.Second, key+": the waiter's subscription back after the restart", func() bool {
		return subscribers(t, f.srv, channel) > 0
	})
	if err := held.Unlock(); err != nil {
		t.Fatalf("%s: the holder's Unlock after the restart: %v", key, err)
	}
	unlocked := time.Now()
	g := waitGrant(t, granted, key)
	if wait = g.at.Sub(unlocked); wait > time.Second {
		t.Errorf("%s: the waiter got the lock %v after the holder's Unlock, want within 1s", key, wait)
	}
	if g.token <= held.Token() {
		t.Errorf("%s: fencing token %d after the restart, not above the holder's %d: the counter did not survive in the AOF", key, g.token, held.Token())
	}
	return wait, 0
}

// waitGrant waits (at most 10s) for a waiter started by waitBehind to get the lock.
func waitGrant(t *testing.T, granted <-chan grant, key string) grant {
	t.Helper()
	select {
	case g := <-granted:
		if g.err != nil {
			t.Fatalf("%s: the waiter: %v", key, g.err)
		}
		return g
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the waiter did not get the lock within 10s", key)
		return grant{}
	}
}
