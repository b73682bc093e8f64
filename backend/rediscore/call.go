package rediscore

import (
	"context"
	"sync"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// The call layer: how a script call is bounded (CallTimeout, Bound), cut short when its ctx ends
// (Interruptible) and acknowledged by replicas (WithReplicaAck: acknowledged, acknowledgedBatch).
// Each part is taken only when it is needed: a ctx that can never end is not watched, and
// without WithReplicaAck a script call is the driver's call itself.

// CallTimeout bounds a call whose ctx has no deadline in drivers without I/O timeouts of their
// own (Redigo), and every re-subscription attempt: a server that stops answering (paused,
// partitioned) must give an error, not a hang. It matches go-redis's and rueidis's default I/O
// timeouts, which bound their calls.
const CallTimeout = 10 * time.Second

// Bound returns ctx with a deadline CallTimeout away when it has none, for drivers without I/O
// timeouts of their own.
func Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, CallTimeout)
}

// Interruptible returns d with script calls that return as soon as their ctx ends, even while
// the driver waits for a reply, for a driver that does not watch its ctx then: go-redis reads a
// reply until its ReadTimeout, whatever the ctx; rueidis, which watches it on a connection that
// is up, dials and greets a new connection of its pipelines (one is made for the first key of
// each) until its dial and write timeouts (5s). A call cut short returns ctx.Err(); its outcome
// is unknown, as for any call whose ctx ended, and the driver's call goes on in the background
// until the driver's own timeouts end it. A ctx that can never end costs nothing extra.
func Interruptible(d Driver) Driver { return interruptible{d} }

type interruptible struct{ Driver }

func (d interruptible) Eval(ctx context.Context, s *Script, keys, args []string) (Reply, error) {
	done := ctx.Done()
	if done == nil {
		return d.Driver.Eval(ctx, s, keys, args)
	}
	// The hot path of every Lock and Unlock, in two allocations: the goroutine's closure (its
	// arguments, copied) and an unbuffered channel that carries the outcome. The goroutine
	// hands the outcome over while the caller waits for it, or drops it once ctx has ended,
	// which is the only way the caller leaves without it: it never blocks for good.
	drv, outcome := d.Driver, make(chan evalOutcome)
	go func() {
		r, err := drv.Eval(ctx, s, keys, args)
		select {
		case outcome <- evalOutcome{r, err}:
		case <-done:
		}
	}()
	select {
	case o := <-outcome:
		return o.reply, o.err
	case <-done:
		select {
		case o := <-outcome: // both ready: the outcome is known, so report it
			return o.reply, o.err
		default:
			return Reply{}, ctx.Err()
		}
	}
}

// evalOutcome is the outcome of one Eval of interruptible.
type evalOutcome struct {
	reply Reply
	err   error
}

func (d interruptible) EvalBatch(ctx context.Context, s *Script, calls []Call) []Result {
	results, err := interrupt(ctx, func() ([]Result, error) { return d.Driver.EvalBatch(ctx, s, calls), nil })
	if err != nil {
		results = make([]Result, len(calls))
		for i := range results {
			results[i].Err = err
		}
	}
	return results
}

func (d interruptible) EvalWait(ctx context.Context, s *Script, keys, args []string, replicas int, timeout time.Duration) (Reply, int, error) {
	type waited struct {
		reply Reply
		acks  int
	}
	w, err := interrupt(ctx, func() (waited, error) {
		r, acks, err := d.Driver.EvalWait(ctx, s, keys, args, replicas, timeout)
		return waited{r, acks}, err
	})
	return w.reply, w.acks, err
}

// interrupt runs call and returns its outcome, or ctx.Err() as soon as ctx ends first; call then
// goes on in its goroutine, and its outcome is dropped. (Its state is not pooled: a channel made
// in a synctest bubble, as a user's test may be, cannot be used outside it.)
func interrupt[T any](ctx context.Context, call func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return call()
	}
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		v, err := call()
		done <- outcome{v, err}
	}()
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
		select {
		case o := <-done: // both ready: the outcome is known, so report it
			return o.v, o.err
		default:
			var zero T
			return zero, ctx.Err()
		}
	}
}

// write runs s, a script that changes the lock or its queue: the driver's Eval itself, or, with
// WithReplicaAck, through acknowledged, with the replicas that acknowledged it (0 without).
func (b *Backend) write(ctx context.Context, s *Script, keys, args []string) (Reply, int, error) {
	if b.opts.acks == 0 {
		r, err := b.d.Eval(ctx, s, keys, args)
		return r, 0, err
	}
	return b.acknowledged(ctx, s, keys, args)
}

// writeBatch is write for a batch of calls of s (renew.lua): the driver's EvalBatch, or
// acknowledgedBatch with WithReplicaAck.
func (b *Backend) writeBatch(ctx context.Context, s *Script, calls []Call) []Result {
	if b.opts.acks == 0 {
		return b.d.EvalBatch(ctx, s, calls)
	}
	return b.acknowledgedBatch(ctx, s, calls)
}

// acknowledged runs s, a script that changes the lock or its queue (acquire.lua, release.lua,
// handoff.lua, dequeue.lua; renew.lua through acknowledgedBatch), with WithReplicaAck: through
// Driver.EvalWait (the script, then WAIT on its connection, for waitFor), reporting how many
// replicas acknowledged it, which the caller compares with b.opts.acks. A call whose ctx has no
// deadline gets one, the wait plus CallTimeout. Without WithReplicaAck, write runs the driver's
// Eval instead.
func (b *Backend) acknowledged(ctx context.Context, s *Script, keys, args []string) (Reply, int, error) {
	wait := b.waitFor(ctx)
	if _, ok := ctx.Deadline(); !ok {
		// Every call ends: the drivers' own I/O timeouts may not cover a wait this long.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+CallTimeout)
		defer cancel()
	}
	return b.d.EvalWait(ctx, s, keys, args, b.opts.acks, wait)
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

// batchConcurrency bounds the acknowledged calls of a batch (with their WAITs) in flight at
// once.
const batchConcurrency = 8

// acknowledgedBatch runs the calls of s (renew.lua) with WithReplicaAck, and returns one Result
// per call, in order: each call through acknowledged, up to batchConcurrency at once; a call
// that fewer replicas acknowledged than configured fails with an error wrapping
// locker.ErrUnavailable and ErrNotReplicated, although it ran on the master. Without
// WithReplicaAck, writeBatch runs the driver's EvalBatch instead.
func (b *Backend) acknowledgedBatch(ctx context.Context, s *Script, calls []Call) []Result {
	results := make([]Result, len(calls))
	sem := make(chan struct{}, batchConcurrency)
	var wg sync.WaitGroup
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, acks, err := b.acknowledged(ctx, s, c.Keys, c.Args)
			if err == nil && acks < b.opts.acks {
				err = display.Errorf("%w: %w (%d of %d)", locker.ErrUnavailable, ErrNotReplicated, acks, b.opts.acks)
			}
			results[i] = Result{Reply: r, Err: err}
		})
	}
	wg.Wait()
	return results
}
