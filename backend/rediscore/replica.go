package rediscore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// ErrNotReplicated means that fewer replicas than asked for (WithReplicaAck) acknowledged an
// acquire or a release within the timeout. An error wrapping it also wraps locker.ErrUnavailable:
// for an acquire, the lock was taken back and the Client's Lock tries again; for a release, the
// lock was released on the master, but a failover may bring it back until its lease runs out.
// Test for it with errors.Is.
var ErrNotReplicated = errors.New("locker: not acknowledged by enough replicas")

// WithReplicaAck makes the Backend wait, after every acquire, release, dequeue and renewal,
// until n replicas of the master that ran it have acknowledged it (WAIT n, on the same connection
// and round trip), for at most timeout (whole milliseconds, rounded up; at most half of what is
// left of the call's ctx). When fewer acknowledge in time, a granted acquire is taken back at
// once and Acquire returns an error wrapping locker.ErrUnavailable and ErrNotReplicated (Lock
// retries it); a release or dequeue has happened on the master and returns the same error; a
// renewal is reported as unknown. Inspect and ForceRelease do not wait. What it guarantees
// across failovers and what it costs: docs/safety.md; a restricted user's ACL needs +wait.
// n must be at least 1 and timeout positive, or every call of the Backend returns an error
// wrapping locker.ErrInvalid. Default: no waiting.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) {
		if n < 1 || timeout <= 0 {
			o.fail(display.Errorf("%w: WithReplicaAck(%d, %v): want at least 1 replica and a positive timeout", locker.ErrInvalid, n, timeout))
			return
		}
		o.acks, o.ackTimeout = n, timeout
	}
}

// change runs a script that changes the lock or its queue (acquire.lua, release.lua,
// dequeue.lua, renew.lua): with WithReplicaAck,
// through Driver.EvalWait, reporting how many replicas acknowledged it; otherwise through Eval,
// reporting -1.
func (b *Backend) change(ctx context.Context, s *Script, keys, args []string) (Reply, int, error) {
	if b.opts.acks == 0 {
		r, err := b.d.Eval(ctx, s, keys, args)
		return r, -1, err
	}
	wait := b.waitFor(ctx)
	if _, ok := ctx.Deadline(); !ok {
		// Every call ends: the drivers' own I/O timeouts may not cover a wait this long.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+CallTimeout)
		defer cancel()
	}
	return b.d.EvalWait(ctx, s, keys, args, b.opts.acks, wait)
}

// renewConcurrency bounds the renewal calls (with their WAITs) in flight at once.
const renewConcurrency = 8

// renewAcknowledged runs the renewal calls with WithReplicaAck: each through EvalWait (the
// script, then WAIT on its connection), up to renewConcurrency at once. A call that fewer
// replicas acknowledged than configured fails with an error wrapping locker.ErrUnavailable and
// ErrNotReplicated: its renewals happened on the master, but the Client counts them as unknown,
// so a lease that the replicas stop confirming ends, as it would in a partition, instead of
// outliving what a promoted replica knows.
func (b *Backend) renewAcknowledged(ctx context.Context, calls []Call) []Result {
	results := make([]Result, len(calls))
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, acks, err := b.change(ctx, RenewScript, c.Keys, c.Args)
			if err == nil && acks < b.opts.acks {
				err = display.Errorf("%w: %w (%d of %d)", locker.ErrUnavailable, ErrNotReplicated, acks, b.opts.acks)
			}
			results[i] = Result{Reply: r, Err: err}
		})
	}
	wg.Wait()
	return results
}

// waitFor returns the WAIT timeout of a call with ctx: the configured one, but at most half of
// what is left of ctx; in whole milliseconds (rounded up from the configuration, down from ctx),
// at least 1 (WAIT 0 would wait for ever).
func (b *Backend) waitFor(ctx context.Context) time.Duration {
	wait := (b.opts.ackTimeout + time.Millisecond - 1).Truncate(time.Millisecond)
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, (time.Until(d) / 2).Truncate(time.Millisecond))
	}
	return max(wait, time.Millisecond)
}

// unreplicated is the error of an acquire or a release that fewer than the configured replicas
// acknowledged.
func (b *Backend) unreplicated(op string, acks int, what string) error {
	return display.Errorf("%s: %s: %w: %w (%d of %d)%s", b.prefix, op, locker.ErrUnavailable, ErrNotReplicated, acks, b.opts.acks, what)
}

// takeBack undoes a granted acquire that too few replicas acknowledged: a take-back of req.ID
// when it has one (a copy of the acquire sent again later is then refused), else the release of
// one hold. It does not wait for replicas: the take-back is about the master, and an acquire
// lost in a failover is as good as taken back. It returns the error for Acquire.
func (b *Backend) takeBack(ctx context.Context, req locker.AcquireRequest, acks int) error {
	keys, args := releaseCall(locker.ReleaseRequest{Key: req.Key, Owner: req.Owner, ID: req.ID, Undo: req.ID != "", Fresh: req.Fresh, Shared: req.Shared})
	if _, err := b.d.Eval(ctx, ReleaseScript, keys, args); err != nil {
		// The hold may still be there: the Client takes the acquire back again (or sends it
		// again, and then waits for the replicas again).
		return display.Errorf("%w; taking it back failed: %w", b.unreplicated("acquire", acks, ""), b.fail(ctx, "release", err))
	}
	return b.unreplicated("acquire", acks, "; taken back")
}
