package rediscore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// Only a request that is shared, fair or waits passes the wait queue (and its wait and the
// notice channel) to acquire.lua: a plain exclusive Lock or TryLock sends what it always did.
func TestAcquireQueueOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	q, ch := QueueKey("k"), Channel("k")
	for _, c := range []struct {
		req        locker.AcquireRequest
		keys, args []string
	}{
		{locker.AcquireRequest{Fresh: true}, []string{"k"}, []string{"o", "1000", "n"}},
		{locker.AcquireRequest{ID: "i", Fence: true}, []string{"k", MarkerKey("k", "i"), FenceKey("k")}, []string{"o", "1000", "mf"}},
		{locker.AcquireRequest{Shared: true}, []string{"k", q}, []string{"o", "1000", "sq", "0", ch}},
		{locker.AcquireRequest{Fair: true, ID: "i", Fence: true}, []string{"k", MarkerKey("k", "i"), q, FenceKey("k")}, []string{"o", "1000", "mfoq", "0", ch}},
		{locker.AcquireRequest{Wait: 1500 * time.Microsecond, Reentry: true}, []string{"k", q}, []string{"o", "1000", "rq", "2", ch}},
		{locker.AcquireRequest{Shared: true, Fair: true, Wait: time.Minute, Fresh: true}, []string{"k", q}, []string{"o", "1000", "nsoq", "60000", ch}},
	} {
		d := &ackDriver{replies: granted}
		req := c.req
		req.Key, req.Owner, req.TTL = "k", "o", time.Second
		if _, err := New(d, "test").Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		got := d.recorded()[0]
		if !slices.Equal(got.keys, c.keys) || !slices.Equal(got.args, c.args) {
			t.Errorf("Acquire %+v: keys %q args %q, want %q %q", c.req, got.keys, got.args, c.keys, c.args)
		}
	}
	d := &ackDriver{replies: granted}
	if _, err := New(d, "test").Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, Wait: -1}); !errors.Is(err, locker.ErrInvalid) || len(d.recorded()) != 0 {
		t.Fatalf("Acquire with a negative wait = %v, want ErrInvalid and no call", err)
	}
}

// A plain exclusive acquire and release allocate no more than the call's keys and arguments
// (what they did before shared holds and queues).
func TestPlainAcquireAllocs(t *testing.T) {
	d := nopDriver{}
	b := New(d, "test")
	ctx := context.Background()
	req := locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, Fresh: true}
	rel := locker.ReleaseRequest{Key: "k", Owner: "o"}
	if n := testing.AllocsPerRun(100, func() { _, _ = b.Acquire(ctx, req) }); n > 2 {
		t.Errorf("plain Acquire: %v allocations, want at most 2 (keys, args)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = b.Release(ctx, rel) }); n > 3 {
		t.Errorf("plain Release: %v allocations, want at most 3 (keys, args, channel)", n)
	}
}

// nopDriver answers every script with a fixed reply, allocating nothing.
type nopDriver struct{ hungDriver }

var nopReply = Reply{Array: []int64{1, 0}}

func (nopDriver) Eval(context.Context, *Script, []string, []string) (Reply, error) {
	return nopReply, nil
}

// A granted shared acquire that too few replicas acknowledged is taken back as a shared hold;
// a dequeue waits for the replicas, and says when too few acknowledged.
func TestReplicaAckKinds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &ackDriver{replies: granted, acks: 0}
	b := New(d, "test", WithReplicaAck(1, time.Second))
	if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, ID: "i", Shared: true}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("shared Acquire with 0 of 1 acks = %v", err)
	}
	calls := d.recorded()
	if len(calls) != 2 || calls[1].script != "release" || !slices.Equal(calls[1].args, []string{"o", Channel("k"), "musq"}) {
		t.Fatalf("calls %+v, want a shared take-back", calls)
	}

	d = &ackDriver{replies: map[string]Reply{"dequeue": {Int: 1}}, acks: 0}
	b = New(d, "test", WithReplicaAck(1, time.Second))
	if err := b.Dequeue(ctx, "k", "o"); !errors.Is(err, ErrNotReplicated) || !errors.Is(err, locker.ErrUnavailable) || !contains(err, "dequeued on the master") {
		t.Fatalf("Dequeue with 0 of 1 acks = %v", err)
	}
	d.acks = 1
	if err := b.Dequeue(ctx, "k", "o"); err != nil {
		t.Fatalf("Dequeue with 1 of 1 acks = %v", err)
	}
	calls = d.recorded()
	if len(calls) != 2 || calls[0].wait != time.Second || !slices.Equal(calls[0].keys, []string{QueueKey("k"), "k", FenceKey("k")}) || !slices.Equal(calls[0].args, []string{"o", Channel("k")}) {
		t.Fatalf("calls %+v, want dequeue.lua with WAIT on the queue", calls)
	}
}

// The scripts' UPGRADE answer wraps locker.ErrUpgrade.
func TestUpgradeError(t *testing.T) {
	d := &ackDriver{evalErr: errors.New("UPGRADE the owner holds the lock shared")}
	_, err := New(d, "test").Acquire(context.Background(), locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second})
	if !errors.Is(err, locker.ErrUpgrade) || errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Acquire answered UPGRADE = %v, want ErrUpgrade", err)
	}
}

// A permit request (Limit) is sent as a shared one that passes the queue, with 'p', its limit,
// then the grant's lease and the ID when it asks for one; it reads {holds, token, taken}. A limit
// below 0 or over MaxLimit is refused before any call, and WRONGLIMIT wraps
// locker.ErrLimitMismatch.
func TestPermitRequest(t *testing.T) {
	ctx := context.Background()
	d := &ackDriver{replies: map[string]Reply{"acquire": {Array: []int64{-1500, 0, 3}}}}
	b := New(d, "test")
	req := locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, ID: "i", Limit: 3, Grant: time.Second, Fresh: true}
	a, err := b.Acquire(ctx, req)
	if err != nil || a != (locker.Acquisition{TTL: 1500 * time.Millisecond, Taken: 3}) {
		t.Fatalf("a refused permit request = %+v, %v; want TTL 1.5s and 3 taken", a, err)
	}
	got := d.recorded()[0]
	if want := []string{"k", MarkerKey("k", "i"), QueueKey("k")}; !slices.Equal(got.keys, want) {
		t.Errorf("keys %q, want %q", got.keys, want)
	}
	if want := []string{"o", "1000", "mnsqp", "0", Channel("k"), "3", "1000", "i"}; !slices.Equal(got.args, want) {
		t.Errorf("args %q, want %q", got.args, want)
	}
	plain := req
	plain.Grant, plain.ID, plain.Wait = 0, "", 1500*time.Millisecond
	if _, err := b.Acquire(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if got, want := d.recorded()[1].args, []string{"o", "1000", "nsqp", "1500", Channel("k"), "3"}; !slices.Equal(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
	d.replies["acquire"] = Reply{Array: []int64{2, 77, 0}}
	if a, err := b.Acquire(ctx, req); err != nil || a != (locker.Acquisition{Holds: 2, Token: 77}) {
		t.Fatalf("a granted permit request = %+v, %v; want 2 holds, token 77", a, err)
	}
	d.replies["acquire"] = Reply{Array: []int64{1, 0}}
	if _, err := b.Acquire(ctx, req); err == nil {
		t.Fatal("a permit request answered {holds, token} = no error, want one")
	}
	for _, limit := range []int{-1, MaxLimit + 1} {
		d := &ackDriver{replies: granted}
		bad := req
		bad.Limit = limit
		if _, err := New(d, "test").Acquire(ctx, bad); !errors.Is(err, locker.ErrInvalid) || len(d.recorded()) != 0 {
			t.Fatalf("Acquire with limit %d = %v, want ErrInvalid and no call", limit, err)
		}
	}
	if MaxLimit != New(d, "test").MaxLimit() {
		t.Fatal("MaxLimit() is not MaxLimit")
	}
	// A granted permit that too few replicas acknowledged is taken back as the shared hold it is.
	d = &ackDriver{replies: map[string]Reply{"acquire": {Array: []int64{1, 0, 0}}, "release": {Int: 0}}}
	if _, err := New(d, "test", WithReplicaAck(1, time.Second)).Acquire(ctx, req); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("a permit with 0 of 1 acks = %v, want ErrNotReplicated", err)
	}
	if calls := d.recorded(); len(calls) != 2 || calls[1].script != "release" || !slices.Equal(calls[1].args, []string{"o", Channel("k"), "munsq"}) {
		t.Fatalf("calls %+v, want a shared take-back", calls)
	}
	d = &ackDriver{evalErr: errors.New("WRONGLIMIT the key is held as a semaphore of 2, not 3")}
	if _, err := New(d, "test").Acquire(ctx, req); !errors.Is(err, locker.ErrLimitMismatch) || !contains(err, "a semaphore of 2, not 3") {
		t.Fatalf("Acquire answered WRONGLIMIT = %v, want ErrLimitMismatch with the reason", err)
	}
}
