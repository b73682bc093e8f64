// Package valkeylocker is the locker backend for valkey-go (github.com/valkey-io/valkey-go): keep
// the client you have — a single-node, Cluster or Sentinel valkey.Client, on Valkey or on Redis
// 7 — and get the reentrant lock of package locker on it. The directory is backend/valkey; the
// package is named valkeylocker so that it reads well next to the driver's own package valkey.
//
//	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"localhost:6379"}})
//	…
//	client := locker.New(valkeylocker.New(c))
//
// valkey-go is a fork of rueidis, and the adapter is the rueidis one on valkey-go's types (see
// package rueidislocker for how scripts, batches, notices and WithReplicaAck use the client):
// scripts through Lua script objects, renewals in one DoMulti, notices on a few dedicated
// connections per node (rediscore.WithNoticeConns), never on the connections that run commands.
// The scripts and key layout are those of every Redis backend of this module, so clients of
// different drivers can share locks.
//
// valkey-go turns client-side caching on by default, which needs CLIENT TRACKING. Against a
// server without it — miniredis, for one — create the client with ClientOption.DisableCache:
// true, or valkey.NewClient fails; miniredis also answers CLUSTER SLOTS, so valkey.NewClient
// makes its cluster client there unless ForceSingleClient is set. The lock does not use the
// cache.
package valkeylocker

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker/backend/rediscore"
)

// New returns the Redis backend (a locker.Locker) on c, configured by opts (rediscore.Option:
// WithReplicaAck, WithNoticeConns; none by default). It is safe for concurrent use and needs no
// Close: c stays the caller's, and the Backend never closes it.
func New(c valkey.Client, opts ...rediscore.Option) *rediscore.Backend {
	return rediscore.New(rediscore.Interruptible(newDriver(c)), "valkey", opts...)
}

func newDriver(c valkey.Client) *driver {
	return &driver{
		c:       c,
		cluster: c.Mode() == valkey.ClientModeCluster,
		scripts: rediscore.PrepareScripts(func(src string) *valkey.Lua { return valkey.NewLuaScript(src) }),
		slots: rediscore.NewSlotMap(func(ctx context.Context) (any, error) {
			return c.Do(ctx, c.B().ClusterSlots().Build()).ToAny()
		}),
	}
}

// driver implements rediscore.Driver with valkey-go: the glue of package rueidislocker on
// valkey-go's types (the reasons for each choice are given there); what does not depend on the
// types is in rediscore (EvalBatchRetry, EvalWaitRetry, SlotMap, WatchHooks).
type driver struct {
	c       valkey.Client
	cluster bool
	scripts map[*rediscore.Script]*valkey.Lua // read-only after New
	slots   *rediscore.SlotMap                // for sharded notices on a cluster
}

// Cluster reports whether c is valkey-go's cluster client.
func (d *driver) Cluster() bool { return d.cluster }

// Eval runs s through its Lua object: EVALSHA, then EVAL on NOSCRIPT.
func (d *driver) Eval(ctx context.Context, s *rediscore.Script, keys, args []string) (rediscore.Reply, error) {
	return reply(d.scripts[s].Exec(ctx, d.c, keys, args))
}

// EvalBatch sends one EVALSHA per call in one DoMulti, and the calls refused with NOSCRIPT
// again through Lua.ExecMulti.
func (d *driver) EvalBatch(ctx context.Context, s *rediscore.Script, calls []rediscore.Call) []rediscore.Result {
	return rediscore.EvalBatchRetry(calls, func(calls []rediscore.Call) []rediscore.Result {
		cmds := make(valkey.Commands, len(calls))
		for i, c := range calls {
			cmds[i] = d.c.B().Evalsha().Sha1(s.SHA1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
		}
		return rediscore.DecodedResults(d.c.DoMulti(ctx, cmds...))
	}, func(calls []rediscore.Call) []rediscore.Result {
		return rediscore.DecodedResults(d.scripts[s].ExecMulti(ctx, d.c, rediscore.ScriptCalls[valkey.LuaExec](calls)...))
	})
}

// EvalWait sends the script and WAIT in one DoMulti on a dedicated connection.
func (d *driver) EvalWait(ctx context.Context, s *rediscore.Script, keys, args []string, replicas int, timeout time.Duration) (r rediscore.Reply, acks int, err error) {
	err = d.c.Dedicated(func(dc valkey.DedicatedClient) (err error) {
		r, acks, err = rediscore.EvalWaitRetry(func(eval bool) (rediscore.Result, int64, error) {
			b, n := dc.B(), int64(len(keys))
			script := b.Evalsha().Sha1(s.SHA1).Numkeys(n).Key(keys...).Arg(args...).Build()
			if eval {
				script = b.Eval().Script(s.Source).Numkeys(n).Key(keys...).Arg(args...).Build()
			}
			resps := dc.DoMulti(ctx, script, b.Wait().Numreplicas(int64(replicas)).Timeout(timeout.Milliseconds()).Build())
			reply, err := rediscore.DecodedReply(resps[0].ToAny())
			acks, ackErr := resps[1].AsInt64()
			return rediscore.Result{Reply: reply, Err: err}, acks, ackErr
		})
		return err
	})
	return r, acks, err
}

// PubSubNode implements rediscore.Driver as rueidislocker does.
func (d *driver) PubSubNode(ctx context.Context, channel string, sharded bool) (string, error) {
	if !d.cluster {
		return "", nil
	}
	return d.slots.PubSubNode(ctx, channel, sharded, maps.Keys(d.c.Nodes()))
}

// DialPubSub implements rediscore.Driver with valkey-go pub/sub hooks on a dedicated connection
// of the node's client.
func (d *driver) DialPubSub(_ context.Context, node string, events rediscore.PubSubEvents) (rediscore.PubSubConn, error) {
	c := d.c
	if node != "" {
		n, ok := d.c.Nodes()[node]
		if !ok {
			d.slots.Forget()
			return nil, fmt.Errorf("no client for node %s", node)
		}
		c = n
	}
	dc, _ := c.Dedicate() // Close releases it
	done := dc.SetPubSubHooks(valkey.PubSubHooks{
		OnMessage:      func(m valkey.PubSubMessage) { events.Message(m.Channel, m.Message) },
		OnSubscription: func(s valkey.PubSubSubscription) { events.Reply(s.Kind, s.Channel) },
	})
	return rediscore.WatchHooks(pubsub{dc, d.slots}, done, events), nil
}

// pubsub is a rediscore.PubSubConn on a valkey-go dedicated connection.
type pubsub struct {
	dc    valkey.DedicatedClient
	slots *rediscore.SlotMap
}

// Do sends commands in one DoMulti.
func (p pubsub) Do(ctx context.Context, commands ...rediscore.PubSubCommand) error {
	b := p.dc.B()
	cmds := make(valkey.Commands, len(commands))
	for i, c := range commands {
		switch c.Name {
		case "SUBSCRIBE":
			cmds[i] = b.Subscribe().Channel(c.Channels...).Build()
		case "SSUBSCRIBE":
			cmds[i] = b.Ssubscribe().Channel(c.Channels...).Build()
		case "UNSUBSCRIBE":
			cmds[i] = b.Unsubscribe().Channel(c.Channels...).Build()
		case "SUNSUBSCRIBE":
			cmds[i] = b.Sunsubscribe().Channel(c.Channels...).Build()
		default:
			return fmt.Errorf("unknown pub/sub command %s", c.Name)
		}
	}
	for _, r := range p.dc.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return p.slots.ForgetIfMoved(err)
		}
	}
	return nil
}

func (p pubsub) Close() { p.dc.Close() }

// reply converts a script's reply as rediscore.DecodedReply converts its ToAny, without ToAny's
// allocations (see rediscore.ArrayReply).
func reply(res valkey.ValkeyResult) (rediscore.Reply, error) {
	m, err := res.ToMessage()
	switch {
	case err != nil:
		return rediscore.Reply{}, err
	case m.IsInt64():
		v, err := m.AsInt64()
		return rediscore.Reply{Int: v}, err
	}
	elems, err := m.ToArray()
	if err != nil {
		return rediscore.Reply{}, err
	}
	return rediscore.ArrayReply(elems)
}
