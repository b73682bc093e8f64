package locker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// lateLocker is a memory backend whose Acquire with a Wait, after the first skip of them, stays
// in flight until its ctx ends, fails then, and reaches the backend only after the next
// Release or Dequeue call: as a request on the network, whose caller gave up on it, may.
type lateLocker struct {
	*memory.Backend
	mu       sync.Mutex
	skip     int
	inFlight chan struct{}
	late     *locker.AcquireRequest
}

func (l *lateLocker) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	l.mu.Lock()
	hold := req.Wait > 0 && l.skip == 0 && l.late == nil
	if req.Wait > 0 {
		l.skip--
	}
	l.mu.Unlock()
	if !hold {
		return l.Backend.Acquire(ctx, req)
	}
	l.inFlight <- struct{}{}
	<-ctx.Done()
	l.mu.Lock()
	l.late = &req
	l.mu.Unlock()
	return locker.Acquisition{}, ctx.Err()
}

// deliver lets the acquire in flight reach the backend.
func (l *lateLocker) deliver() {
	l.mu.Lock()
	req := l.late
	l.mu.Unlock()
	if req != nil {
		_, _ = l.Backend.Acquire(context.Background(), *req)
	}
}

func (l *lateLocker) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	defer l.deliver()
	return l.Backend.Release(ctx, req)
}

func (l *lateLocker) Dequeue(ctx context.Context, key, owner string) error {
	defer l.deliver()
	return l.Backend.Dequeue(ctx, key, owner)
}

// A writer that gives up while its acquire is in flight leaves no queue entry, even when that
// acquire reaches the backend after the first of the calls the Client sends as it leaves (the
// take-back of the acquire and the Dequeue): the Dequeue follows the take-back, after which the
// acquire is refused without queueing.
func TestWriterThatGivesUpMidAcquireLeavesTheQueue(t *testing.T) {
	for range 20 { // before the fix, the Dequeue came first about every other time
		synctest.Test(t, func(t *testing.T) {
			b := &lateLocker{Backend: memory.New(), skip: 1, inFlight: make(chan struct{}, 1)}
			c := locker.New(b, locker.WithTTL(time.Minute))
			defer c.Close()
			ctx := context.Background()
			r := must(c.RLock(ctx, "k"))(t)
			defer r.Unlock()
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := c.Lock(wctx, "k")
				done <- err
			}()
			<-b.inFlight // refused and queued once, and trying again
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Lock = %v, want Canceled", err)
			}
			synctest.Wait() // the background take-back and Dequeue
			b.deliver()     // once more, in case neither call came
			if st := must(c.Inspect(ctx, "k"))(t); st.Queued != 0 {
				t.Fatalf("after the writer gave up: %+v, want nobody queued", st)
			}
			must(c.TryRLock(ctx, "k"))(t).Unlock()
		})
	}
}
