package rediscore

import (
	"context"
	"time"
)

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
