package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker/backend/rediscore"
)

// go-redis retries a dial that fails (a server that is down refuses it) until the call's ctx ends,
// and then reports the ctx's error alone: a Lock with a deadline would not say that the server
// is down, nor why. dialWatch is a go-redis hook that remembers the latest failed dial, so that
// a call that ended with its ctx can say it.
type dialWatch struct{ last atomic.Pointer[dialFailure] }

// dialFailure is a failed dial and when it failed.
type dialFailure struct {
	err error
	at  time.Time
}

// watchDials adds w to c's hooks: a cluster's or a ring's nodes as they are made (the nodes
// made before are not watched: explain then says nothing more), any other client's own.
func (w *dialWatch) watchDials(c redis.UniversalClient) {
	if nodes, ok := c.(interface{ OnNewNode(func(*redis.Client)) }); ok {
		nodes.OnNewNode(func(n *redis.Client) { n.AddHook(w) })
		return
	}
	c.AddHook(w)
}

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			w.last.Store(&dialFailure{err, time.Now()})
		}
		return conn, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// explain adds to err, the error of a call begun at start, when it is its ctx's, the latest dial
// that failed since start: the Backend then reports the server unavailable, with the driver's
// own error, and the ctx's.
func (w *dialWatch) explain(start time.Time, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	if f := w.last.Load(); f != nil && !f.at.Before(start) {
		return fmt.Errorf("%w (a dial failed meanwhile: %w)", err, f.err)
	}
	return err
}

// explained is a Driver whose script calls that end with their ctx say why the server did not
// answer, when a dial failed meanwhile (see dialWatch).
type explained struct {
	rediscore.Driver
	dials *dialWatch
}

func (d explained) Eval(ctx context.Context, s *rediscore.Script, keys, args []string) (rediscore.Reply, error) {
	start := time.Now()
	r, err := d.Driver.Eval(ctx, s, keys, args)
	return r, d.dials.explain(start, err)
}

func (d explained) EvalWait(ctx context.Context, s *rediscore.Script, keys, args []string, replicas int, timeout time.Duration) (rediscore.Reply, int, error) {
	start := time.Now()
	r, acks, err := d.Driver.EvalWait(ctx, s, keys, args, replicas, timeout)
	return r, acks, d.dials.explain(start, err)
}
