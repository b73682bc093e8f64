package conformance

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hashlock/locker"
)

// exclusion: goroutines lock one key in turns and update a counter that only the lock protects.
// Two of them inside at once is a failure, and so is a lost update; -race reports the
// unprotected access too. Half the goroutines have their own Client, as separate processes
// would; the other half share one, whose Lock calls queue locally.
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
			for range rounds {
				l, err := c.Lock(ctx, key, locker.WithRetry(locker.LinearBackoff(e.ttl/50)))
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
	if counter != workers*rounds {
		t.Fatalf("counter = %d after %d locked increments: updates were lost", counter, workers*rounds)
	}
}
