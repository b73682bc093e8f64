package rediscore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// ackDriver runs nothing: it answers each script with replies[s.Name] and each WAIT with acks,
// and records the calls.
type ackDriver struct {
	replies map[string]Reply
	acks    int
	evalErr error // the error of Eval (not EvalWait)

	mu    sync.Mutex
	calls []ackCall
}

type ackCall struct {
	script     string
	keys, args []string
	wait       time.Duration // 0: Eval, no WAIT
	replicas   int
	deadline   time.Time // of the call's ctx; zero without one
	sent       time.Time
}

func (d *ackDriver) record(ctx context.Context, c ackCall) {
	c.deadline, _ = ctx.Deadline()
	c.sent = time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, c)
}

func (d *ackDriver) Eval(ctx context.Context, s *Script, keys, args []string) (Reply, error) {
	d.record(ctx, ackCall{script: s.Name, keys: keys, args: args})
	return d.replies[s.Name], d.evalErr
}

func (d *ackDriver) EvalWait(ctx context.Context, s *Script, keys, args []string, replicas int, timeout time.Duration) (Reply, int, error) {
	d.record(ctx, ackCall{script: s.Name, keys: keys, args: args, wait: timeout, replicas: replicas})
	return d.replies[s.Name], d.acks, nil
}

func (d *ackDriver) EvalBatch(ctx context.Context, s *Script, calls []Call) []Result {
	d.record(ctx, ackCall{script: s.Name})
	res := make([]Result, len(calls))
	for i := range res {
		res[i].Reply = Reply{Array: make([]int64, len(calls[i].Keys))}
		for j := range res[i].Reply.Array {
			res[i].Reply.Array[j] = 1
		}
	}
	return res
}

func (d *ackDriver) PubSubNode(context.Context, string, bool) (string, error) {
	return "", errors.ErrUnsupported
}

func (d *ackDriver) DialPubSub(context.Context, string, PubSubEvents) (PubSubConn, error) {
	return nil, errors.ErrUnsupported
}

func (*ackDriver) Cluster() bool { return false }

func (d *ackDriver) recorded() []ackCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

var (
	granted = map[string]Reply{"acquire": {Array: []int64{1, 0}}, "release": {Int: 0}}
	refused = map[string]Reply{"acquire": {Array: []int64{-500, 0}}, "release": {Int: -1}}
)

// An invalid WithReplicaAck (or a nil Option) makes every call fail with ErrInvalid, and none
// reaches the driver.
func TestReplicaAckInvalid(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]Option{
		"no replica":        WithReplicaAck(0, time.Second),
		"negative replicas": WithReplicaAck(-1, time.Second),
		"zero timeout":      WithReplicaAck(1, 0),
		"negative timeout":  WithReplicaAck(1, -time.Second),
		"nil option":        nil,
		"no notice conns":   WithNoticeConns(0),
	} {
		d := &ackDriver{replies: granted}
		b := New(d, "test", opt)
		_, errA := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second})
		_, errR := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o"})
		_, errI := b.Inspect(ctx, "k")
		_, errF := b.ForceRelease(ctx, "k")
		_, _, errS := b.Subscribe(ctx, "k")
		errN := b.Renew(ctx, []locker.Renewal{{Key: "k", Owner: "o", TTL: time.Second}})[0]
		errD := b.Dequeue(ctx, "k", "o")
		for i, err := range []error{errA, errR, errI, errF, errS, errN, errD} {
			if !errors.Is(err, locker.ErrInvalid) {
				t.Errorf("%s: call %d = %v, want ErrInvalid", name, i, err)
			}
		}
		if calls := d.recorded(); len(calls) != 0 {
			t.Errorf("%s: %d calls reached the driver", name, len(calls))
		}
	}
}

// An acquire that too few replicas acknowledged is taken back at once: with its request ID (a
// take-back) when it has one, else by releasing one hold; the error wraps ErrUnavailable (Lock
// retries it) and ErrNotReplicated.
func TestReplicaAckTakesBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range []string{"req-1", ""} {
		d := &ackDriver{replies: granted, acks: 1}
		b := New(d, "test", WithReplicaAck(2, 300*time.Millisecond))
		_, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, ID: id})
		if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("id %q: Acquire with 1 of 2 acks = %v, want ErrUnavailable and ErrNotReplicated", id, err)
		}
		calls := d.recorded()
		if len(calls) != 2 {
			t.Fatalf("id %q: %d calls, want the acquire and its take-back: %+v", id, len(calls), calls)
		}
		if a := calls[0]; a.script != "acquire" || a.wait != 300*time.Millisecond || a.replicas != 2 {
			t.Fatalf("id %q: first call %+v, want acquire with WAIT 2 300ms", id, a)
		}
		wantKeys, wantArgs := []string{"k"}, []string{"o", Channel("k"), "q"}
		if id != "" {
			wantKeys = append(wantKeys, MarkerKey("k", id))
			wantArgs = []string{"o", Channel("k"), "muq"}
		}
		wantKeys = append(wantKeys, QueueKey("k"), FenceKey("k"))
		if r := calls[1]; r.script != "release" || r.wait != 0 || !slices.Equal(r.keys, wantKeys) || !slices.Equal(r.args, wantArgs) {
			t.Fatalf("id %q: take-back %+v, want release.lua without WAIT, keys %q, args %q", id, r, wantKeys, wantArgs)
		}
	}

	// A take-back that fails leaves the outcome unknown: still ErrUnavailable, and it says so.
	d := &ackDriver{replies: granted, evalErr: errors.New("ERR boom")}
	b := New(d, "test", WithReplicaAck(1, time.Second))
	_, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, ID: "x"})
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, ErrNotReplicated) || !contains(err, "taking it back failed") {
		t.Fatalf("Acquire whose take-back failed = %v", err)
	}
}

// Enough acknowledgements: the acquire and the release succeed in one call each. A refusal, or a
// release of a lock not held, needs none.
func TestReplicaAckEnough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &ackDriver{replies: granted, acks: 2}
	b := New(d, "test", WithReplicaAck(2, time.Second))
	a, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, ID: "i"})
	if err != nil || a.Holds != 1 {
		t.Fatalf("Acquire with 2 of 2 acks = %+v, %v", a, err)
	}
	if n, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o", ID: "j"}); err != nil || n != 0 {
		t.Fatalf("Release with 2 of 2 acks = %d, %v", n, err)
	}
	if calls := d.recorded(); len(calls) != 2 || calls[0].wait == 0 || calls[1].wait == 0 {
		t.Fatalf("calls %+v, want two with WAIT", calls)
	}

	d = &ackDriver{replies: refused, acks: 0}
	b = New(d, "test", WithReplicaAck(1, time.Second))
	a, err = b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, ID: "i"})
	if err != nil || a.Holds != 0 || a.TTL != 500*time.Millisecond {
		t.Fatalf("refused Acquire with 0 acks = %+v, %v; want the refusal", a, err)
	}
	if _, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o"}); !errors.Is(err, locker.ErrNotHeld) || errors.Is(err, ErrNotReplicated) {
		t.Fatalf("Release of a lock not held, 0 acks = %v, want ErrNotHeld only", err)
	}
	if calls := d.recorded(); len(calls) != 2 {
		t.Fatalf("calls %+v, want no take-back", calls)
	}
}

// A release that too few replicas acknowledged happened on the master, and says so.
func TestReplicaAckRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &ackDriver{replies: granted, acks: 0}
	b := New(d, "test", WithReplicaAck(1, time.Second))
	_, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o", ID: "r"})
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, ErrNotReplicated) || !contains(err, "released on the master") {
		t.Fatalf("Release with 0 of 1 acks = %v", err)
	}
	if calls := d.recorded(); len(calls) != 1 {
		t.Fatalf("calls %+v, want the release only", calls)
	}
}

// Renewals wait for replicas: one that too few acknowledged is unknown (ErrUnavailable and
// ErrNotReplicated), one that enough acknowledged is renewed. Inspect and ForceRelease do not
// wait.
func TestReplicaAckRenewInspectForce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batch := []locker.Renewal{{Key: "k", Owner: "o", TTL: time.Second}, {Key: "l", Owner: "o", TTL: time.Second}}
	for acks, want := range map[int]error{1: nil, 0: ErrNotReplicated} {
		d := &ackDriver{replies: map[string]Reply{"renew": {Array: []int64{1, 1}}}, acks: acks}
		b := New(d, "test", WithReplicaAck(1, time.Second))
		for i, err := range b.Renew(ctx, batch) {
			if want == nil && err != nil || want != nil && (!errors.Is(err, want) || !errors.Is(err, locker.ErrUnavailable)) {
				t.Fatalf("%d acks: entry %d: %v, want %v", acks, i, err, want)
			}
		}
		if calls := d.recorded(); len(calls) != 1 || calls[0].script != "renew" || calls[0].replicas != 1 || calls[0].wait != time.Second {
			t.Fatalf("%d acks: calls %+v, want one renew with WAIT 1 1s", acks, calls)
		}
	}
	d := &ackDriver{replies: map[string]Reply{"inspect": {Array: []int64{0, 0, 0, 0, 0, 0}}, "force": {Int: 1}}}
	b := New(d, "test", WithReplicaAck(1, time.Second))
	if _, err := b.Inspect(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ForceRelease(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.recorded() {
		if c.wait != 0 {
			t.Fatalf("%s waited for replicas", c.script)
		}
	}
}

// The WAIT timeout is the configured one in whole milliseconds (rounded up), at most half of what
// is left of the ctx, at least 1ms; a call without a deadline gets one.
func TestReplicaAckWaitTimeout(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		ctx     time.Duration // 0: no deadline
		want    time.Duration // exact, or with ctx an upper bound
	}{
		{"rounded up", 1500 * time.Microsecond, 0, 2 * time.Millisecond},
		{"sub-millisecond", time.Microsecond, 0, time.Millisecond},
		{"configured", time.Second, time.Minute, time.Second},
		{"half the ctx", time.Minute, 2 * time.Second, time.Second},
		{"ctx almost over", time.Second, 10 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, c := range cases {
		d := &ackDriver{replies: granted, acks: 1}
		b := New(d, "test", WithReplicaAck(1, c.timeout))
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if c.ctx > 0 {
			ctx, cancel = context.WithTimeout(ctx, c.ctx)
		}
		_, _ = b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o"})
		cancel()
		calls := d.recorded()
		if len(calls) != 1 {
			t.Fatalf("%s: %d calls", c.name, len(calls))
		}
		got := calls[0]
		switch {
		case got.wait%time.Millisecond != 0 || got.wait < time.Millisecond:
			t.Errorf("%s: WAIT timeout %v, want whole milliseconds, at least 1", c.name, got.wait)
		case c.ctx == 0 && got.wait != c.want:
			t.Errorf("%s: WAIT timeout %v, want %v", c.name, got.wait, c.want)
		case c.ctx > 0 && (got.wait > c.want || got.wait < c.want-50*time.Millisecond):
			t.Errorf("%s: WAIT timeout %v, want about %v", c.name, got.wait, c.want)
		case got.deadline.IsZero():
			t.Errorf("%s: the driver's ctx had no deadline", c.name)
		case c.ctx == 0 && got.deadline.Sub(got.sent) > got.wait+CallTimeout:
			t.Errorf("%s: the driver's ctx ends in %v, want at most the wait plus %v", c.name, got.deadline.Sub(got.sent), CallTimeout)
		}
	}
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}
