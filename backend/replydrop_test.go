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

// replyDropTrials is how many times each reply-drop scenario runs per driver.
const replyDropTrials = 20

// A lost reply to an acquire (the script ran on the server, the client never heard back) never
// leaves the server with a hold more than the Client believes it has: after a first Lock, after
// a re-entry through the lease's context, and after a TryLock (which does not retry: its acquire
// is then taken back). Whoever sends the acquire again — go-redis by itself, or the Client —
// sends the same request ID, and the server's marker answers with the first run's outcome.
func TestAcquireReplyDropped(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		f := startFaulty(t)
		c := locker.New(f.backend(t, d), locker.WithTTL(10*time.Second))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tookBack := 0
		for i := range replyDropTrials {
			key := fmt.Sprintf("drop:acquire:%s:%d", d.name, i)

			// A first Lock whose reply is lost.
			l := dropping(t, f, rediscore.AcquireScript, func() *locker.Lease {
				l, err := c.Lock(ctx, key)
				if err != nil {
					t.Fatalf("Lock %s with its reply lost: %v", key, err)
				}
				return l
			})
			if l.Holds() != 1 {
				t.Fatalf("Lock %s: Holds %d, want 1", key, l.Holds())
			}
			wantHolds(t, f.srv, key, 1, "after a Lock whose reply was lost")

			// A re-entry whose reply is lost.
			inner := dropping(t, f, rediscore.AcquireScript, func() *locker.Lease {
				inner, err := c.Lock(l.Context(), key)
				if err != nil {
					t.Fatalf("re-entry of %s with its reply lost: %v", key, err)
				}
				return inner
			})
			if inner.Holds() != 2 {
				t.Fatalf("re-entry of %s: Holds %d, want 2", key, inner.Holds())
			}
			wantHolds(t, f.srv, key, 2, "after a re-entry whose reply was lost")
			if err := inner.Unlock(); err != nil {
				t.Fatal(err)
			}
			wantHolds(t, f.srv, key, 1, "after unlocking the re-entry")
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
			wantHolds(t, f.srv, key, 0, "after unlocking both holds")

			// A TryLock whose reply is lost: granted (go-redis sent it again by itself), or
			// failed as unavailable and taken back in the background.
			key += ":try"
			var tryErr error
			tl := dropping(t, f, rediscore.AcquireScript, func() *locker.Lease {
				tl, err := c.TryLock(ctx, key)
				tryErr = err
				return tl
			})
			if tryErr != nil {
				if !errors.Is(tryErr, locker.ErrUnavailable) {
					t.Fatalf("TryLock %s with its reply lost: %v, want a grant or ErrUnavailable", key, tryErr)
				}
				tookBack++
				waitUntil(t, 2*time.Second, "the take-back of the failed TryLock", func() bool {
					return len(holdsOn(t, f.srv, key)) == 0
				})
				continue
			}
			wantHolds(t, f.srv, key, tl.Holds(), "after a TryLock whose reply was lost")
			if err := tl.Unlock(); err != nil {
				t.Fatal(err)
			}
			wantHolds(t, f.srv, key, 0, "after unlocking the TryLock")
		}
		t.Logf("%s: %d trials of Lock, re-entry and TryLock with the acquire's reply lost, 0 violations; %d TryLocks failed and were taken back",
			d.name, replyDropTrials, tookBack)
	})
}

// A lost reply to a release never makes it count twice: with an outer and an inner lease, an
// inner Unlock whose reply is lost leaves exactly one hold (not none: that would free the lock
// under the outer lease), another owner is refused, and the outer Unlock, whose reply is lost
// too, frees the key.
func TestReleaseReplyDropped(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		f := startFaulty(t)
		b := f.backend(t, d)
		c := locker.New(b, locker.WithTTL(10*time.Second))
		defer c.Close()
		other := locker.New(f.direct(t, d))
		defer other.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range replyDropTrials {
			key := fmt.Sprintf("drop:release:%s:%d", d.name, i)
			outer, err := c.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := c.Lock(outer.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			dropping(t, f, rediscore.ReleaseScript, func() *locker.Lease {
				if err := inner.Unlock(); err != nil {
					t.Fatalf("inner Unlock of %s with its reply lost: %v", key, err)
				}
				return nil
			})
			wantHolds(t, f.srv, key, 1, "after an inner Unlock whose reply was lost")
			if l, err := other.TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
				_ = l.Unlock()
				t.Fatalf("another owner's TryLock of %s under the outer lease: %v, want ErrNotObtained", key, err)
			}
			if err := outer.Context().Err(); err != nil {
				t.Fatalf("the outer lease of %s ended: %v", key, context.Cause(outer.Context()))
			}
			dropping(t, f, rediscore.ReleaseScript, func() *locker.Lease {
				if err := outer.Unlock(); err != nil {
					t.Fatalf("outer Unlock of %s with its reply lost: %v", key, err)
				}
				return nil
			})
			wantHolds(t, f.srv, key, 0, "after the outer Unlock whose reply was lost")
		}
		t.Logf("%s: %d trials of inner and outer Unlock with the release's reply lost, 0 violations", d.name, replyDropTrials)
	})
}

// dropping runs call with the proxy set to lose the reply to the next command that runs s (the
// command still runs on the server), checks that exactly that one reply was lost, and returns
// call's lease.
func dropping(t *testing.T, f *faulty, s *rediscore.Script, call func() *locker.Lease) *locker.Lease {
	t.Helper()
	before := f.proxy.Dropped()
	f.proxy.DropRepliesTo(s.SHA1, 1)
	l := call()
	f.proxy.DropRepliesTo("", 0)
	if n := f.proxy.Dropped() - before; n != 1 {
		t.Fatalf("%d replies to %s were lost, want 1: the fault did not fire", n, s.Name)
	}
	return l
}
