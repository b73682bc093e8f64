package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// hungDriver answers nothing: every call waits for its ctx, as on a server that stopped.
type hungDriver struct{ deadlines chan bool }

func (h hungDriver) wait(ctx context.Context) error {
	_, ok := ctx.Deadline()
	h.deadlines <- ok
	<-ctx.Done()
	return ctx.Err()
}

func (h hungDriver) Eval(ctx context.Context, _ *Script, _, _ []string) (Reply, error) {
	return Reply{}, h.wait(ctx)
}

func (h hungDriver) EvalBatch(ctx context.Context, _ *Script, calls []Call) []Result {
	err := h.wait(ctx)
	res := make([]Result, len(calls))
	for i := range res {
		res[i].Err = err
	}
	return res
}

func (h hungDriver) Subscribe(ctx context.Context, _ string, _ bool, _, _ func()) (func(), error) {
	return nil, h.wait(ctx)
}

func (hungDriver) Cluster() bool { return false }

// A call without a deadline gets one, so no driver can hang on a silent server; a call with a
// deadline keeps its own, and its error says the ctx ended.
func TestCallsAreBounded(t *testing.T) {
	d := hungDriver{deadlines: make(chan bool, 1)}
	b := New(d, "test")
	calls := map[string]func(ctx context.Context, key string) error{
		"acquire": func(ctx context.Context, k string) error { _, err := b.Acquire(ctx, k, "o", time.Second); return err },
		"release": func(ctx context.Context, k string) error { _, err := b.Release(ctx, k, "o"); return err },
		"renew": func(ctx context.Context, k string) error {
			return b.Renew(ctx, []locker.Renewal{{Key: k, Owner: "o", TTL: time.Second}})[0]
		},
		"inspect":   func(ctx context.Context, k string) error { _, err := b.Inspect(ctx, k); return err },
		"force":     func(ctx context.Context, k string) error { _, err := b.ForceRelease(ctx, k); return err },
		"subscribe": func(ctx context.Context, k string) error { _, _, err := b.Subscribe(ctx, k); return err },
	}
	for name, call := range calls {
		// Without a deadline: the call ends after callTimeout, not waited for here.
		go func() { _ = call(context.Background(), name+":unbounded") }()
		if !<-d.deadlines {
			t.Fatalf("%s without a deadline reached the driver without one", name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		err := call(ctx, name+":bounded")
		cancel()
		<-d.deadlines
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with an ending ctx = %v, want it to wrap DeadlineExceeded", name, err)
		}
	}
}
