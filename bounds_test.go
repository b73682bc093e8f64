package locker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// stalled is a backend that stops answering once stall is set: every call then waits for its
// ctx, as a network backend waits for a reply that never comes.
type stalled struct {
	locker.Locker
	stall bool
}

func (s *stalled) wait(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *stalled) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if s.stall {
		return locker.Acquisition{}, s.wait(ctx)
	}
	return s.Locker.Acquire(ctx, req)
}

func (s *stalled) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if s.stall {
		return 0, s.wait(ctx)
	}
	return s.Locker.Release(ctx, req)
}

func (s *stalled) Inspect(ctx context.Context, key string) (locker.State, error) {
	return locker.State{}, s.wait(ctx)
}

func (s *stalled) ForceRelease(ctx context.Context, key string) (bool, error) {
	return false, s.wait(ctx)
}

// Close ends Lock, TryLock, Inspect and ForceUnlock calls that wait for the backend, at once and
// with ErrClosed, though their ctx never ends; the background take-back of the Lock's acquire
// does not hold Close up.
func TestCloseEndsCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := locker.New(&stalled{Locker: memory.New(), stall: true})
		calls := map[string]func() error{
			"Lock":        func() error { _, err := c.Lock(context.Background(), "k"); return err },
			"TryLock":     func() error { _, err := c.TryLock(context.Background(), "k"); return err },
			"Inspect":     func() error { _, err := c.Inspect(context.Background(), "k"); return err },
			"ForceUnlock": func() error { _, err := c.ForceUnlock(context.Background(), "k"); return err },
		}
		errs := make(map[string]chan error)
		for name, call := range calls {
			ch := make(chan error, 1)
			errs[name] = ch
			go func() { ch <- call() }()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		for name, ch := range errs {
			select {
			case err := <-ch:
				t.Fatalf("%s returned before Close: %v", name, err)
			default:
			}
		}
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for name, ch := range errs {
			select {
			case err := <-ch:
				if !errors.Is(err, locker.ErrClosed) {
					t.Errorf("%s = %v, want ErrClosed", name, err)
				}
			default:
				t.Errorf("%s still running after Close", name)
			}
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("Close took %v", took)
		}
	})
}

// Unlock against a backend that stopped answering returns at WithUnlockTimeout (a Client default
// or a Lock option), or DefaultUnlockTimeout, with an error that says the hold may remain.
func TestUnlockTimeout(t *testing.T) {
	for _, tc := range []struct {
		name             string
		clientOpts, opts []locker.Option
		want             time.Duration
	}{
		{"default", nil, nil, locker.DefaultUnlockTimeout},
		{"client", []locker.Option{locker.WithUnlockTimeout(time.Second)}, nil, time.Second},
		{"call", []locker.Option{locker.WithUnlockTimeout(time.Second)}, []locker.Option{locker.WithUnlockTimeout(300 * time.Millisecond)}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &stalled{Locker: memory.New()}
				c := locker.New(b, tc.clientOpts...)
				defer c.Close()
				l, err := c.Lock(context.Background(), "k", tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				b.stall = true
				start := time.Now()
				err = l.Unlock()
				if took := time.Since(start); took != tc.want {
					t.Errorf("Unlock took %v, want %v", took, tc.want)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Unlock = %v, want an error wrapping DeadlineExceeded", err)
				}
			})
		})
	}
}
