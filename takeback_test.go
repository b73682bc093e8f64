package locker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// flaky is a backend whose Acquire takes effect but loses its reply, and whose first take-backs
// (Release with Undo), as many as takeBacks, fail as unavailable without reaching the backend:
// a partition that swallows the acquire's reply and then the take-back.
type flaky struct {
	locker.Locker
	takeBacks atomic.Int32 // take-backs still to fail
	tries     atomic.Int32 // take-backs sent
}

var errPartition = errors.New("partition")

func (f *flaky) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	_, _ = f.Locker.Acquire(ctx, req)
	return locker.Acquisition{}, errors.Join(locker.ErrUnavailable, errPartition)
}

func (f *flaky) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if req.Undo {
		f.tries.Add(1)
		if f.takeBacks.Add(-1) >= 0 {
			return 0, errors.Join(locker.ErrUnavailable, errPartition)
		}
	}
	return f.Locker.Release(ctx, req)
}

// A Lock that gives up on an acquire of unknown outcome takes it back even when the backend is
// unavailable for a moment: the take-back is sent again (with the same request ID, so that it
// never removes a second hold) until it gets through, and the key is free long before the
// acquire's TTL.
func TestTakeBackRetriedWhileUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		b := &flaky{Locker: mem}
		b.takeBacks.Store(3)
		c := locker.New(b, locker.WithTTL(time.Minute))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Lock(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with every reply lost = %v, want DeadlineExceeded", err)
		}
		if st, _ := mem.Inspect(context.Background(), "k"); st.Holds != 1 {
			t.Fatalf("the lost acquire left %+v, want one hold to take back", st)
		}
		time.Sleep(5 * time.Second) // the take-back's whole time
		if st, _ := mem.Inspect(context.Background(), "k"); st.Locked {
			t.Fatalf("the key is still held (%+v) 5s after Lock took back its acquire (%d take-backs sent, the first 3 failed)",
				st, b.tries.Load())
		}
		if n := b.tries.Load(); n != 4 {
			t.Fatalf("%d take-backs sent, want 4: the 3 that failed and 1 that got through", n)
		}
	})
}

// Close waits for a take-back that is under way (so that it leaves no goroutine behind, and a
// backend closed after the Client is not pulled from under it), and a take-back that fails after
// Close is not sent again.
func TestCloseWaitsForTakeBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		b := &flaky{Locker: mem}
		b.takeBacks.Store(1 << 20) // every take-back fails
		c := locker.New(b, locker.WithTTL(time.Minute))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Lock(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with every reply lost = %v, want DeadlineExceeded", err)
		}
		start := time.Now()
		c.Close()
		if d := time.Since(start); d >= time.Second {
			t.Fatalf("Close took %v: it waited for the take-back's retries", d)
		}
		tries := b.tries.Load()
		if tries == 0 {
			t.Fatal("no take-back was sent before Close returned")
		}
		time.Sleep(10 * time.Second)
		if n := b.tries.Load(); n != tries {
			t.Fatalf("%d take-backs sent after Close, want none", n-tries)
		}
	})
}
