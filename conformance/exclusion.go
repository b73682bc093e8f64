package conformance

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker"
)

// exclusion: goroutines lock one key in turns and update a counter that only the lock protects.
// Two of them inside at once is a failure, and so is a lost update; -race reports the
// unprotected access too. Half the goroutines have their own Client, as separate processes
// would; the other half share one, whose Lock calls queue locally. Then they take it as often
// with TryLock, trying again after a short sleep: no queue and no grant, so that they race for
// a free key (a waiting Lock mostly gets the key granted by the release, never free).
func exclusion(e *env) {
	const workers, rounds = 8, 50
	t, ctx, key := e.t, background(e.t), e.key("exclusion")
	var (
		inside  atomic.Int32
		counter int // protected by the distributed lock only
		wg      sync.WaitGroup
		fail    = make(chan error, workers)
	)
	shared := e.client()
	for i := range workers {
		c := shared
		if i%2 == 0 {
			c = e.client()
		}
		wg.Go(func() {
			for round := range 2 * rounds {
				var l *locker.Lease
				var err error
				if round < rounds {
					l, err = c.Lock(ctx, key, locker.WithRetry(locker.LinearBackoff(e.ttl/50)))
				} else {
					for l, err = c.TryLock(ctx, key); errors.Is(err, locker.ErrNotObtained); l, err = c.TryLock(ctx, key) {
						time.Sleep(e.ttl / 200)
					}
				}
				if err != nil {
					fail <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders inside the lock at once", n)
				}
				v := counter
				runtime.Gosched() // widen the window a second holder would need
				counter = v + 1
				inside.Add(-1)
				if err := l.Unlock(); err != nil {
					fail <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if counter != 2*workers*rounds {
		t.Fatalf("counter = %d after %d locked increments: updates were lost", counter, 2*workers*rounds)
	}
}
