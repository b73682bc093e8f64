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

// driver implements rediscore.Driver with valkey-go; what does not depend on valkey-go's types is
// in rediscore (EvalBatchRetry, EvalWaitRetry, SlotMap, WatchHooks).
type driver struct {
	c       valkey.Client
	cluster bool
	scripts map[*rediscore.Script]*valkey.Lua // read-only after New
	slots   *rediscore.SlotMap                // for sharded notices on a cluster
}

// Cluster reports whether c is valkey-go's cluster client (Mode is part of valkey.Client, so
// wrappers of the client report it too).
func (d *driver) Cluster() bool { return d.cluster }

// Eval runs s through its Lua object: EVALSHA, then EVAL on NOSCRIPT.
func (d *driver) Eval(ctx context.Context, s *rediscore.Script, keys, args []string) (rediscore.Reply, error) {
	return rediscore.DecodedReply(d.scripts[s].Exec(ctx, d.c, keys, args).ToAny())
}

// EvalBatch sends one EVALSHA per call in one DoMulti: one pipeline, one per node on a cluster.
// (Lua.ExecMulti would first SCRIPT LOAD on every node, a second round trip on every batch.)
// The calls the server refuses with NOSCRIPT did not run: they run again through
// Lua.ExecMulti, which loads the script on every node first.
func (d *driver) EvalBatch(ctx context.Context, s *rediscore.Script, calls []rediscore.Call) []rediscore.Result {
	return rediscore.EvalBatchRetry(calls, func(calls []rediscore.Call) []rediscore.Result {
		cmds := make(valkey.Commands, len(calls))
		for i, c := range calls {
			cmds[i] = d.c.B().Evalsha().Sha1(s.SHA1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
		}
		return results(d.c.DoMulti(ctx, cmds...))
	}, func(calls []rediscore.Call) []rediscore.Result {
		execs := make([]valkey.LuaExec, len(calls))
		for i, c := range calls {
			execs[i] = valkey.LuaExec{Keys: c.Keys, Args: c.Args}
		}
		return results(d.scripts[s].ExecMulti(ctx, d.c, execs...))
	})
}

// EvalWait sends the script and WAIT in one DoMulti on a dedicated connection (Dedicated: on a
// cluster, one to the master of the script's slot), so that WAIT follows the script there.
func (d *driver) EvalWait(ctx context.Context, s *rediscore.Script, keys, args []string, replicas int, timeout time.Duration) (r rediscore.Reply, acks int, err error) {
	err = d.c.Dedicated(func(dc valkey.DedicatedClient) (err error) {
		r, acks, err = rediscore.EvalWaitRetry(func(eval bool) (rediscore.Result, int64, error) {
			b, n := dc.B(), int64(len(keys))
			script := b.Evalsha().Sha1(s.SHA1).Numkeys(n).Key(keys...).Arg(args...).Build()
			if eval {
				script = b.Eval().Script(s.Source).Numkeys(n).Key(keys...).Arg(args...).Build()
			}
			resps := dc.DoMulti(ctx, script, b.Wait().Numreplicas(int64(replicas)).Timeout(timeout.Milliseconds()).Build())
			acks, err := resps[1].AsInt64()
			return result(resps[0]), acks, err
		})
		return err
	})
	return r, acks, err
}

// PubSubNode implements rediscore.Driver: on a cluster, a sharded channel's node is the master
// of its slot, from the slot map (CLUSTER SLOTS, fetched again when it is older than a second).
// A node's own client carries channels of any slot; the cluster client's Dedicate would not.
func (d *driver) PubSubNode(ctx context.Context, channel string, sharded bool) (string, error) {
	if !d.cluster || !sharded {
		return "", nil
	}
	if nodes := d.c.Nodes(); len(nodes) == 1 {
		for addr := range nodes {
			return addr, nil // the one master (valkey-go takes miniredis for a cluster)
		}
	}
	return d.slots.Master(ctx, rediscore.Slot(channel))
}

// DialPubSub implements rediscore.Driver on a dedicated connection (Client.Dedicate; on a
// cluster, of the node's own client), never one that runs commands, with valkey-go pub/sub hooks.
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
		// Hooks run in the connection's reader goroutine: no blocking there.
		OnMessage:      func(m valkey.PubSubMessage) { events.Message(m.Channel) },
		OnSubscription: func(s valkey.PubSubSubscription) { events.Reply(s.Kind, s.Channel) },
	})
	return rediscore.WatchHooks(pubsub{dc, d.slots}, done, events), nil
}

// pubsub is a rediscore.PubSubConn on a valkey-go dedicated connection.
type pubsub struct {
	dc    valkey.DedicatedClient
	slots *rediscore.SlotMap // forgotten when a node answers MOVED
}

// Do sends commands in one DoMulti; valkey-go returns once the server confirmed every channel.
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

// results converts the replies of script calls.
func results(resps []valkey.ValkeyResult) []rediscore.Result {
	out := make([]rediscore.Result, len(resps))
	for i, r := range resps {
		out[i] = result(r)
	}
	return out
}

// result converts the reply of a script call.
func result(r valkey.ValkeyResult) rediscore.Result {
	reply, err := rediscore.DecodedReply(r.ToAny())
	return rediscore.Result{Reply: reply, Err: err}
}
