package redislock

import (
	"context"
	"sync"
	"time"
)

// Interruptible returns d with script calls that return as soon as their ctx ends, even while
// the driver waits for a reply, for a driver that does not watch its ctx then (go-redis reads a
// reply until its ReadTimeout, whatever the ctx). A call cut short returns ctx.Err(); its outcome
// is unknown, as for any call whose ctx ended, and the driver's call goes on in the background
// until the driver's own timeouts end it. A ctx that can never end costs nothing extra.
func Interruptible(d Driver) Driver { return interruptible{d} }

type interruptible struct{ Driver }

func (d interruptible) Eval(ctx context.Context, s *Script, keys, args []string) (Reply, error) {
	if ctx.Done() == nil {
		return d.Driver.Eval(ctx, s, keys, args)
	}
	c := evalCalls.Get().(*evalCall)
	c.d, c.ctx, c.s, c.keys, c.args = d.Driver, ctx, s, keys, args
	go c.run()
	select {
	case <-c.done:
	case <-ctx.Done():
		select {
		case <-c.done: // both ready: the outcome is known, so report it
		default:
			return Reply{}, ctx.Err() // c stays with its goroutine, out of the pool
		}
	}
	r, err := c.reply, c.err
	*c = evalCall{done: c.done}
	evalCalls.Put(c)
	return r, err
}

// evalCall is one Eval of interruptible, run in its own goroutine. The hot path (every acquire
// and release) reuses them, so that it costs little more than the goroutine.
type evalCall struct {
	d          Driver
	ctx        context.Context
	s          *Script
	keys, args []string
	reply      Reply
	err        error
	done       chan struct{} // capacity 1: run never blocks, even when nobody waits any more
}

func (c *evalCall) run() {
	c.reply, c.err = c.d.Eval(c.ctx, c.s, c.keys, c.args)
	c.done <- struct{}{}
}

var evalCalls = sync.Pool{New: func() any { return &evalCall{done: make(chan struct{}, 1)} }}

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
// goes on in its goroutine, and its outcome is dropped.
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
