// Package goredis is the locker backend for go-redis v9 (github.com/redis/go-redis/v9): keep the
// client you have — *redis.Client, *redis.ClusterClient, or a failover (Sentinel) client, any
// redis.UniversalClient — and get the reentrant lock of package locker on it.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	client := locker.New(goredis.New(rdb))
//
// Every call returns when its ctx ends, even while go-redis waits for a reply (go-redis itself
// watches a ctx only before it sends). Creating the client with ContextTimeoutEnabled: true is
// still better: go-redis then gives up the reply at the ctx's deadline too, instead of at its
// ReadTimeout (3s by default), and frees the connection sooner.
//
// Scripts run through go-redis script objects (EVALSHA, EVAL when the server lost its script
// cache); renewals of many leases go out in one pipeline (one per node on a cluster); release
// notices come through go-redis pub/sub, sharded (SSUBSCRIBE) where the server supports it, on a
// few connections per node shared by every contended key (rediscore.WithNoticeConns). With
// rediscore.WithReplicaAck, the script and WAIT go to the master of the key's slot on a
// ClusterClient, to the key's shard on a Ring, and the wait also ends at 4/5 of the client's
// ReadTimeout, beyond which go-redis would stop reading the reply. The scripts and key layout
// are those of every Redis backend of this module, so clients of different drivers can share
// locks.
package goredis

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
)

// New returns the Redis backend (a locker.Locker) on c, configured by opts (rediscore.Option:
// WithReplicaAck, WithNoticeConns; none by default). It is safe for concurrent use and needs no
// Close: c stays the caller's, and the Backend never closes it. New adds a hook to c (to a
// cluster's or a ring's nodes as they are made) that only remembers the latest dial that failed,
// so that a call cut short by its ctx while the server refused connections says so: go-redis
// itself then reports the ctx's error alone.
func New(c redis.UniversalClient, opts ...rediscore.Option) *rediscore.Backend {
	d := &driver{c: c, scripts: rediscore.PrepareScripts(redis.NewScript)}
	_, d.cluster = c.(*redis.ClusterClient)
	dials := &dialWatch{}
	dials.watchDials(c)
	return rediscore.New(explained{rediscore.Interruptible(d), dials}, "goredis", opts...)
}

// driver implements rediscore.Driver with go-redis.
type driver struct {
	c       redis.UniversalClient
	cluster bool
	scripts map[*rediscore.Script]*redis.Script // read-only after New
	nodes   sync.Map                            // node address → *redis.Client, for DialPubSub
}

func (d *driver) Cluster() bool { return d.cluster }

// Eval runs s as redis.Script.Run does: EVALSHA, then EVAL when the server answers NOSCRIPT.
func (d *driver) Eval(ctx context.Context, s *rediscore.Script, keys, args []string) (rediscore.Reply, error) {
	cmd := scriptCmd(ctx, s, false, keys, args)
	_ = d.c.Process(ctx, cmd)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = scriptCmd(ctx, s, true, keys, args)
		_ = d.c.Process(ctx, cmd)
	}
	return reply(cmd)
}

// scriptCmd returns the EVALSHA (with eval: EVAL) of s with keys and args, as go-redis's Script
// builds it, but with every string passed as a pointer into s, keys and args (an *arg), which
// fits an interface as it is: no argument is boxed, so the command costs two allocations (its
// arguments and the Cmd) whatever its length. keys and args must not change until the command
// is done.
func scriptCmd(ctx context.Context, s *rediscore.Script, eval bool, keys, args []string) *redis.Cmd {
	cmdArgs := make([]any, 3+len(keys)+len(args))
	if eval {
		cmdArgs[0], cmdArgs[1] = "eval", (*arg)(&s.Source)
	} else {
		cmdArgs[0], cmdArgs[1] = "evalsha", (*arg)(&s.SHA1)
	}
	cmdArgs[2] = len(keys) // a small int: not boxed either
	for i := range keys {
		cmdArgs[3+i] = (*arg)(&keys[i])
	}
	for i := range args {
		cmdArgs[3+len(keys)+i] = (*arg)(&args[i])
	}
	cmd := redis.NewCmd(ctx, cmdArgs...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

func (d *driver) EvalBatch(ctx context.Context, s *rediscore.Script, calls []rediscore.Call) []rediscore.Result {
	script := d.scripts[s]
	run := func() []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(calls))
		pipe := d.c.Pipeline()
		for i, c := range calls {
			cmds[i] = scriptCmd(ctx, s, false, c.Keys, c.Args)
			_ = pipe.Process(ctx, cmds[i])
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
	results := make([]rediscore.Result, len(cmds))
	for i, cmd := range cmds {
		results[i].Reply, results[i].Err = reply(cmd)
	}
	return results
}

// PubSubNode implements rediscore.Driver: on a ClusterClient a sharded channel's node is the
// master of its slot; on a Ring every channel's node is its shard, where the scripts publish.
func (d *driver) PubSubNode(ctx context.Context, channel string, sharded bool) (string, error) {
	switch d.c.(type) {
	case *redis.ClusterClient:
		if !sharded {
			return "", nil
		}
	case *redis.Ring:
	default:
		return "", nil
	}
	node, err := d.node(ctx, channel) // the channel is in its key's slot
	if err != nil {
		return "", err
	}
	addr := node.Options().Addr
	d.nodes.Store(addr, node)
	return addr, nil
}

// DialPubSub implements rediscore.Driver with a go-redis PubSub, which connects at its first
// command. Its reader ends at the first error: the Backend closes it and subscribes its channels
// on a new one (go-redis's own re-subscription is never used).
func (d *driver) DialPubSub(ctx context.Context, node string, events rediscore.PubSubEvents) (rediscore.PubSubConn, error) {
	var ps *redis.PubSub
	if node == "" {
		ps = d.c.Subscribe(ctx)
	} else if c, ok := d.nodes.Load(node); ok {
		ps = c.(*redis.Client).Subscribe(ctx)
	} else {
		return nil, fmt.Errorf("no client for node %s", node)
	}
	p := &pubsub{ps: ps}
	p.wg.Go(func() {
		for {
			// No read timeout: a connection may rightly hear nothing for long.
			v, err := ps.Receive(context.Background())
			if err != nil {
				if cc, ok := d.c.(*redis.ClusterClient); ok && redis.HasErrorPrefix(err, "MOVED") {
					cc.ReloadState(context.Background())
				}
				events.Failed(err)
				return
			}
			switch v := v.(type) {
			case *redis.Message:
				events.Message(v.Channel, v.Payload)
			case *redis.Subscription:
				events.Reply(v.Kind, v.Channel)
			}
		}
	})
	return p, nil
}

// pubsub is a rediscore.PubSubConn on a go-redis PubSub.
type pubsub struct {
	ps *redis.PubSub
	wg sync.WaitGroup // the reader
}

// Do writes each command; the replies come to the reader.
func (p *pubsub) Do(ctx context.Context, commands ...rediscore.PubSubCommand) error {
	for _, c := range commands {
		var err error
		switch c.Name {
		case "SUBSCRIBE":
			err = p.ps.Subscribe(ctx, c.Channels...)
		case "SSUBSCRIBE":
			err = p.ps.SSubscribe(ctx, c.Channels...)
		case "UNSUBSCRIBE":
			err = p.ps.Unsubscribe(ctx, c.Channels...)
		case "SUNSUBSCRIBE":
			err = p.ps.SUnsubscribe(ctx, c.Channels...)
		default:
			err = fmt.Errorf("unknown pub/sub command %s", c.Name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *pubsub) Close() {
	p.ps.Close()
	p.wg.Wait()
}

// EvalWait pipelines the script and WAIT on the client that serves keys[0]: the client itself,
// the master of the key's slot on a cluster, the key's shard on a ring.
func (d *driver) EvalWait(ctx context.Context, s *rediscore.Script, keys, args []string, replicas int, timeout time.Duration) (rediscore.Reply, int, error) {
	node, err := d.node(ctx, keys[0])
	if err != nil {
		return rediscore.Reply{}, 0, err
	}
	if rt := node.Options().ReadTimeout; rt > 0 {
		// A pipeline's replies are read within ReadTimeout, whatever its commands.
		timeout = max(min(timeout, rt*4/5), time.Millisecond)
	}
	run := func(eval func(redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.Cmd) {
		pipe := node.Pipeline()
		cmd := eval(pipe)
		wait := pipe.Do(ctx, "wait", replicas, timeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // errors are per command
		return cmd, wait
	}
	cmd, wait := run(func(p redis.Pipeliner) *redis.Cmd {
		c := scriptCmd(ctx, s, false, keys, args)
		_ = p.Process(ctx, c)
		return c
	})
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = run(func(p redis.Pipeliner) *redis.Cmd {
			c := scriptCmd(ctx, s, true, keys, args)
			_ = p.Process(ctx, c)
			return c
		})
	}
	r, err := reply(cmd)
	if err != nil {
		if cc, ok := d.c.(*redis.ClusterClient); ok {
			if moved := rediscore.Moved(err); moved != err {
				// The node told us, not the cluster client, that the slot moved.
				cc.ReloadState(ctx)
				err = moved
			}
		}
		return rediscore.Reply{}, 0, err
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
func reply(cmd *redis.Cmd) (rediscore.Reply, error) {
	v, err := cmd.Result()
	if err != nil {
		return rediscore.Reply{}, err
	}
	return rediscore.ReplyOf(v)
}

// arg is a script argument that a command carries by pointer. go-redis writes it as its bytes
// (encoding.BinaryMarshaler), and prints it (hooks, tracing: internal.AppendArg) and routes it
// (a cluster's first key) as its string (fmt.Stringer), as it does a string.
type arg string

// MarshalBinary returns the bytes of the string itself, without a copy: go-redis only writes
// them to the connection's buffer.
func (a *arg) MarshalBinary() ([]byte, error) {
	return unsafe.Slice(unsafe.StringData(string(*a)), len(*a)), nil
}

func (a *arg) String() string { return string(*a) }
