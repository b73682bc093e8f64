package rediscore

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// deafDriver never answers a script call until release is closed, whatever its ctx (as go-redis
// waits for a reply until its ReadTimeout); then it answers 7.
type deafDriver struct {
	hungDriver
	release chan struct{}
}

func (d deafDriver) Eval(context.Context, *Script, []string, []string) (Reply, error) {
	<-d.release
	return Reply{Int: 7}, nil
}

func (d deafDriver) EvalBatch(_ context.Context, _ *Script, calls []Call) []Result {
	<-d.release
	return make([]Result, len(calls))
}

func (d deafDriver) EvalWait(context.Context, *Script, []string, []string, int, time.Duration) (Reply, int, error) {
	<-d.release
	return Reply{Int: 7}, 1, nil
}

// Interruptible returns every script call when its ctx ends, though the driver has not answered,
// and the driver's answer when it comes first; the calls it left finish in the background.
func TestInterruptible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deaf := deafDriver{release: make(chan struct{})}
		d := Interruptible(deaf)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := d.Eval(ctx, AcquireScript, nil, nil)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("Eval = %v after %v, want DeadlineExceeded after 1s", err, time.Since(start))
		}
		if res := d.EvalBatch(ctx, RenewScript, make([]Call, 2)); len(res) != 2 || !errors.Is(res[1].Err, context.DeadlineExceeded) {
			t.Fatalf("EvalBatch = %v, want 2 results with DeadlineExceeded", res)
		}
		if _, _, err := d.EvalWait(ctx, AcquireScript, nil, nil, 1, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("EvalWait = %v, want DeadlineExceeded", err)
		}
		close(deaf.release)
		for range 3 {
			if r, err := d.Eval(t.Context(), AcquireScript, nil, nil); err != nil || r.Int != 7 {
				t.Fatalf("Eval = %v, %v, want 7", r, err)
			}
		}
		synctest.Wait() // the calls cut short have ended: nothing is left in the bubble
	})
}

// One Interruptible driver used in a synctest bubble (a user's test) and then outside it works
// in both: nothing made in the bubble is kept for later calls.
func TestInterruptibleAcrossBubbles(t *testing.T) {
	deaf := deafDriver{release: make(chan struct{})}
	close(deaf.release)
	d := Interruptible(deaf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if _, err := d.Eval(ctx, AcquireScript, nil, nil); err != nil {
				t.Fatal(err)
			}
		})
		if _, err := d.Eval(ctx, AcquireScript, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}
