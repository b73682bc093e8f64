// Package goredis is the locker backend for go-redis v9 (github.com/redis/go-redis/v9): keep the
// client you have — *redis.Client, *redis.ClusterClient, or a failover (Sentinel) client, any
// redis.UniversalClient — and get the reentrant lock of package locker on it.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	client := locker.New(goredis.New(rdb))
//
// Create the client with ContextTimeoutEnabled: true. Without it go-redis ignores the deadlines
// of contexts and bounds each call by its ReadTimeout and WriteTimeout instead (3s by default):
// a Lock whose ctx ends, or an Unlock, can then take that long against a server that stopped
// answering. (The lock's safety does not depend on it: a lease's context ends on time either way.)
//
// Scripts run through go-redis script objects (EVALSHA, EVAL when the server lost its script
// cache); renewals of many leases go out in one pipeline (one per node on a cluster); release
// notices come through go-redis pub/sub, sharded (SSUBSCRIBE) where the server supports it, on
// one pub/sub connection per contended key, shared by all its waiters and closed when the last
// one leaves. The scripts and key layout are those of every Redis backend of this module, so
// clients of different drivers can share locks.
package goredis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/redislock"
)

// Backend is a locker.Locker on a go-redis client. Create it with New; it is safe for concurrent
// use and needs no Close (the go-redis client stays the caller's to close).
type Backend struct {
	*redislock.Backend
}

// New returns a Backend on c, configured by opts (none by default). The Backend never closes
// c.
func New(c redis.UniversalClient, opts ...Option) *Backend {
	d := &driver{c: c, scripts: redislock.PrepareScripts(redis.NewScript)}
	_, d.cluster = c.(*redis.ClusterClient)
	return &Backend{redislock.New(d, "goredis", opts...)}
}

// driver implements redislock.Driver with go-redis.
type driver struct {
	c       redis.UniversalClient
	cluster bool
	scripts map[*redislock.Script]*redis.Script // read-only after New
}

func (d *driver) Cluster() bool { return d.cluster }

func (d *driver) Eval(ctx context.Context, s *redislock.Script, keys, args []string) (redislock.Reply, error) {
	return reply(d.scripts[s].Run(ctx, d.c, keys, anys(args)...))
}

func (d *driver) EvalBatch(ctx context.Context, s *redislock.Script, calls []redislock.Call) []redislock.Result {
	script := d.scripts[s]
	run := func() []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(calls))
		pipe := d.c.Pipeline()
		for i, c := range calls {
			cmds[i] = script.EvalSha(ctx, pipe, c.Keys, anys(c.Args)...)
		}
		_, _ = pipe.Exec(ctx) // errors are per command
		return cmds
	}
	cmds := run()
	for _, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			// The server lost its script cache: load the script (on every master of a
			// cluster) and run the batch again, once.
			if err := script.Load(ctx, d.c).Err(); err == nil {
				cmds = run()
			}
			break
		}
	}
	results := make([]redislock.Result, len(cmds))
	for i, cmd := range cmds {
		results[i].Reply, results[i].Err = reply(cmd)
	}
	return results
}

// Subscribe subscribes with a go-redis PubSub, which reconnects and re-subscribes by itself
// (so lost is never called): the confirmation it receives then is taken as a notice.
func (d *driver) Subscribe(ctx context.Context, channel string, sharded bool, notify, _ func()) (func(), error) {
	var ps *redis.PubSub
	if sharded {
		ps = d.c.SSubscribe(ctx, channel)
	} else {
		ps = d.c.Subscribe(ctx, channel)
	}
	// The first reply is the server's confirmation, or its refusal.
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		if sharded && redislock.IsUnknownCommand(err) {
			return nil, fmt.Errorf("SSUBSCRIBE: %w", redislock.ErrUnsupported)
		}
		return nil, err
	}
	var wg sync.WaitGroup
	msgs := ps.ChannelWithSubscriptions()
	wg.Go(func() {
		// A message is a notice; a subscription confirmation after the first one means
		// go-redis reconnected and subscribed again, and notices may have been missed.
		for range msgs {
			notify()
		}
	})
	return func() {
		ps.Close()
		wg.Wait()
	}, nil
}

// EvalWait pipelines the script and WAIT on the client that serves keys[0]: the client itself,
// the master of the key's slot on a cluster, the key's shard on a ring.
func (d *driver) EvalWait(ctx context.Context, s *redislock.Script, keys, args []string, replicas int, timeout time.Duration) (redislock.Reply, int, error) {
	node, err := d.node(ctx, keys[0])
	if err != nil {
		return redislock.Reply{}, 0, err
	}
	if rt := node.Options().ReadTimeout; rt > 0 {
		// A pipeline's replies are read within ReadTimeout, whatever its commands.
		timeout = max(min(timeout, rt*4/5), time.Millisecond)
	}
	script := d.scripts[s]
	run := func(eval func(redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.Cmd) {
		pipe := node.Pipeline()
		cmd := eval(pipe)
		wait := pipe.Do(ctx, "wait", replicas, timeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // errors are per command
		return cmd, wait
	}
	cmd, wait := run(func(p redis.Pipeliner) *redis.Cmd { return script.EvalSha(ctx, p, keys, anys(args)...) })
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = run(func(p redis.Pipeliner) *redis.Cmd { return script.Eval(ctx, p, keys, anys(args)...) })
	}
	r, err := reply(cmd)
	if err != nil {
		if cc, ok := d.c.(*redis.ClusterClient); ok {
			if moved := redislock.Moved(err); moved != err {
				// The node told us, not the cluster client, that the slot moved.
				cc.ReloadState(ctx)
				err = moved
			}
		}
		return redislock.Reply{}, 0, err
	}
	acks, err := wait.Int64()
	return r, int(acks), err
}

// node returns the client of the node that serves key, on which a WAIT follows the script.
func (d *driver) node(ctx context.Context, key string) (*redis.Client, error) {
	switch c := d.c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Ring:
		return c.GetShardClientForKey(key)
	}
	return nil, fmt.Errorf("%w: WithReplicaAck needs a *redis.Client, *redis.ClusterClient or *redis.Ring, not a %T", locker.ErrInvalid, d.c)
}

// reply converts a script reply: an integer, or an array of integers.
func reply(cmd *redis.Cmd) (redislock.Reply, error) {
	v, err := cmd.Result()
	if err != nil {
		return redislock.Reply{}, err
	}
	return redislock.ReplyOf(v)
}

// anys converts script arguments for go-redis.
func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}
