package rediscore

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

func (h hungDriver) EvalWait(ctx context.Context, _ *Script, _, _ []string, _ int, _ time.Duration) (Reply, int, error) {
	return Reply{}, 0, h.wait(ctx)
}

func (h hungDriver) EvalBatch(ctx context.Context, _ *Script, calls []Call) []Result {
	err := h.wait(ctx)
	res := make([]Result, len(calls))
	for i := range res {
		res[i].Err = err
	}
	return res
}

func (h hungDriver) PubSubNode(ctx context.Context, _ string, _ bool) (string, error) {
	return "", h.wait(ctx)
}

func (h hungDriver) DialPubSub(ctx context.Context, _ string, _ PubSubEvents) (PubSubConn, error) {
	return nil, h.wait(ctx)
}

func (hungDriver) Cluster() bool { return false }

// A call whose ctx ends reports it, whatever the driver says; Bound gives a ctx without a
// deadline one, and keeps an existing one.
func TestCallsAreBounded(t *testing.T) {
	d := hungDriver{deadlines: make(chan bool, 1)}
	b := New(d, "test")
	acked := New(d, "test", WithReplicaAck(1, time.Second))
	calls := map[string]func(ctx context.Context, key string) error{
		"acquire": func(ctx context.Context, k string) error {
			_, err := b.Acquire(ctx, locker.AcquireRequest{Key: k, Owner: "o", TTL: time.Second})
			return err
		},
		"release": func(ctx context.Context, k string) error {
			_, err := b.Release(ctx, locker.ReleaseRequest{Key: k, Owner: "o"})
			return err
		},
		"acquire with ack": func(ctx context.Context, k string) error {
			_, err := acked.Acquire(ctx, locker.AcquireRequest{Key: k, Owner: "o", TTL: time.Second})
			return err
		},
		"release with ack": func(ctx context.Context, k string) error {
			_, err := acked.Release(ctx, locker.ReleaseRequest{Key: k, Owner: "o"})
			return err
		},
		"renew": func(ctx context.Context, k string) error {
			return b.Renew(ctx, []locker.Renewal{{Key: k, Owner: "o", TTL: time.Second}})[0]
		},
		"inspect":   func(ctx context.Context, k string) error { _, err := b.Inspect(ctx, k); return err },
		"force":     func(ctx context.Context, k string) error { _, err := b.ForceRelease(ctx, k); return err },
		"subscribe": func(ctx context.Context, k string) error { _, _, err := b.Subscribe(ctx, k); return err },
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		err := call(ctx, name)
		cancel()
		<-d.deadlines
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with an ending ctx = %v, want it to wrap DeadlineExceeded", name, err)
		}
	}

	ctx, cancel := Bound(context.Background())
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > CallTimeout {
		t.Fatalf("Bound(Background) has deadline %v, %v; want one within %v", d, ok, CallTimeout)
	}
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	if got, _ := Bound(short); got != short {
		t.Fatal("Bound replaced a ctx that had a deadline")
	}
}

// The scripts keep markers for locker.RequestWindow, written out in their text; release.lua keeps
// a fresh owner's last release's for the window it is given instead (ReleaseRequest.ReplyWindow),
// through its variable life (window in its fast path).
func TestMarkersLiveForTheRequestWindow(t *testing.T) {
	ms := locker.RequestWindow.Milliseconds()
	want := fmt.Sprintf("'px', %d)", ms)
	for _, s := range []*Script{AcquireScript, ReleaseScript} {
		fixed := strings.Count(s.Source, want)
		if s == ReleaseScript {
			if !strings.Contains(s.Source, fmt.Sprintf("local life = (w + r > 0 or not fresh) and %d or window", ms)) ||
				!strings.Contains(s.Source, fmt.Sprintf("and window or %d)", ms)) {
				t.Errorf("release.lua: a marker must live %d ms but for a fresh owner's last release", ms)
			}
			fixed += strings.Count(s.Source, "'px', life)") + strings.Count(s.Source, "'px', window, 'nx')") // the fast path's
		}
		if n := strings.Count(s.Source, "'px', "); n == 0 || n != fixed {
			t.Errorf("%s.lua: markers must live %s (locker.RequestWindow)", s.Name, want)
		}
	}
}
