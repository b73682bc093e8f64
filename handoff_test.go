package locker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// slowHandOff is a memory backend whose HandOff takes a while, as a round trip does: the taker
// runs with its hand-off unconfirmed meanwhile.
type slowHandOff struct {
	*memory.Backend
	calls *atomic.Int32
}

func (s slowHandOff) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	s.calls.Add(1)
	select {
	case <-time.After(300 * time.Microsecond):
	case <-ctx.Done():
		return locker.HandOffResult{}, errors.Join(locker.ErrUnavailable, ctx.Err())
	}
	return s.Backend.HandOff(ctx, req)
}

// Goroutines of one Client lock one key in turns, handing it on (each Unlock a HandOff) with
// re-entries inside some holds; nobody is ever inside with another, every Lock and Unlock
// succeeds, and a Close in the middle of it all leaves no goroutine blocked (the bubble would
// report a deadlock).
func TestHandOffsInTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := slowHandOff{memory.New(), new(atomic.Int32)}
		c := locker.New(b, locker.WithTTL(50*time.Millisecond))
		var (
			inside  atomic.Int32
			closing atomic.Bool // errors from then on are Close's
			wg      sync.WaitGroup
			stop    = make(chan struct{})
		)
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					l, err := c.Lock(context.Background(), "k")
					if err != nil {
						if !closing.Load() {
							t.Errorf("Lock: %v", err)
						}
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two goroutines inside at once")
					}
					if (g+i)%3 == 0 {
						inner, err := c.Lock(l.Context(), "k") // a re-entry, maybe before the hand-off is confirmed
						if err != nil && !closing.Load() {
							t.Errorf("re-entry: %v", err)
						} else if err == nil {
							if err := inner.Unlock(); err != nil && !closing.Load() {
								t.Errorf("inner Unlock: %v", err)
							}
						}
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := l.Unlock(); err != nil && !closing.Load() {
						t.Errorf("Unlock: %v", err)
					}
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
		st, err := b.Inspect(context.Background(), "k")
		if err != nil || !st.Locked {
			t.Fatalf("Inspect while 8 goroutines take turns = %+v, %v", st, err)
		}
		if n := b.calls.Load(); n < 100 {
			t.Errorf("%d HandOff calls in 200ms of 1ms holds, want most hand-offs local", n)
		}
		closing.Store(true)
		close(stop)
		_ = c.Close()
		wg.Wait()
	})
}
