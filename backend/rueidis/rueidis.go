// Package rueidislocker is the locker backend for rueidis (github.com/redis/rueidis): keep the
// client you have — a single-node, Redis Cluster or Sentinel rueidis.Client — and get the
// reentrant lock of package locker on it. The directory is backend/rueidis; the package is named
// rueidislocker so that it reads well next to the driver's own package rueidis.
//
//	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"localhost:6379"}})
//	…
//	client := locker.New(rueidislocker.New(c))
//
// Scripts run through rueidis Lua script objects (EVALSHA, EVAL when the server lost its script
// cache); renewals of many leases go out as EVALSHA calls in one DoMulti (one pipeline per node
// on a cluster), and when the server answers NOSCRIPT the script is loaded on every node and the
// refused calls run again, once. Release notices come through rueidis pub/sub hooks on a
// few dedicated connections per node (Client.Dedicate; see rediscore.WithNoticeConns), never on the
// connections that run commands: sharded (SSUBSCRIBE) where the server supports it, else
// SUBSCRIBE. With rediscore.WithReplicaAck, the script and WAIT go out on a dedicated connection
// (Client.Dedicated; on a cluster, one to the master of the key's slot). The scripts and key
// layout are those of every Redis backend of this module, so clients of different drivers can
// share locks.
//
// rueidis turns client-side caching on by default, which needs CLIENT TRACKING (Redis >= 6).
// Against a server without it — miniredis, for one — create the client with
// ClientOption.DisableCache: true, or rueidis.NewClient fails. The lock does not use the cache.
//
// Note that rueidis.NewClient picks its cluster client whenever the server answers CLUSTER
// SLOTS (miniredis does); the Backend then groups renewals by slot, which is harmless on a
// single node.
package rueidislocker

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/redis/rueidis"

	"github.com/hashlock/locker/backend/rediscore"
)

// New returns the Redis backend (a locker.Locker) on c, configured by opts (rediscore.Option:
// WithReplicaAck, WithNoticeConns; none by default). It is safe for concurrent use and needs no
// Close: c stays the caller's, and the Backend never closes it.
func New(c rueidis.Client, opts ...rediscore.Option) *rediscore.Backend {
	return rediscore.New(rediscore.Interruptible(newDriver(c)), "rueidis", opts...)
}

func newDriver(c rueidis.Client) *driver {
	return &driver{
		c:       c,
		cluster: c.Mode() == rueidis.ClientModeCluster,
		scripts: rediscore.PrepareScripts(func(src string) *rueidis.Lua { return rueidis.NewLuaScript(src) }),
		slots: rediscore.NewSlotMap(func(ctx context.Context) (any, error) {
			return c.Do(ctx, c.B().ClusterSlots().Build()).ToAny()
		}),
	}
}

// driver implements rediscore.Driver with rueidis; what does not depend on rueidis's types is
// in rediscore (EvalBatchRetry, EvalWaitRetry, SlotMap, WatchHooks).
type driver struct {
	c       rueidis.Client
	cluster bool
	scripts map[*rediscore.Script]*rueidis.Lua // read-only after New
	slots   *rediscore.SlotMap                 // for sharded notices on a cluster
}

// Cluster reports whether c is rueidis's cluster client (Mode is part of rueidis.Client, so
// wrappers of the client report it too).
func (d *driver) Cluster() bool { return d.cluster }

// Eval runs s through its Lua object: EVALSHA, then EVAL on NOSCRIPT.
func (d *driver) Eval(ctx context.Context, s *rediscore.Script, keys, args []string) (rediscore.Reply, error) {
	return reply(d.scripts[s].Exec(ctx, d.c, keys, args))
}

// EvalBatch sends one EVALSHA per call in one DoMulti: one pipeline, one per node on a cluster.
// (Lua.ExecMulti would first SCRIPT LOAD on every node, a second round trip on every batch.)
// The calls the server refuses with NOSCRIPT did not run: they run again through
// Lua.ExecMulti, which loads the script on every node first.
func (d *driver) EvalBatch(ctx context.Context, s *rediscore.Script, calls []rediscore.Call) []rediscore.Result {
	return rediscore.EvalBatchRetry(calls, func(calls []rediscore.Call) []rediscore.Result {
		cmds := make(rueidis.Commands, len(calls))
		for i, c := range calls {
			cmds[i] = d.c.B().Evalsha().Sha1(s.SHA1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
		}
		return rediscore.DecodedResults(d.c.DoMulti(ctx, cmds...))
	}, func(calls []rediscore.Call) []rediscore.Result {
		return rediscore.DecodedResults(d.scripts[s].ExecMulti(ctx, d.c, rediscore.ScriptCalls[rueidis.LuaExec](calls)...))
	})
}

// EvalWait sends the script and WAIT in one DoMulti on a dedicated connection (Dedicated: on a
// cluster, one to the master of the script's slot), so that WAIT follows the script there.
func (d *driver) EvalWait(ctx context.Context, s *rediscore.Script, keys, args []string, replicas int, timeout time.Duration) (r rediscore.Reply, acks int, err error) {
	err = d.c.Dedicated(func(dc rueidis.DedicatedClient) (err error) {
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

// PubSubNode implements rediscore.Driver: on a cluster, a sharded channel's node is the master
// of its slot, from the slot map (CLUSTER SLOTS, fetched again when it is older than a second).
// A node's own client carries channels of any slot; the cluster client's Dedicate would not.
func (d *driver) PubSubNode(ctx context.Context, channel string, sharded bool) (string, error) {
	if !d.cluster {
		return "", nil
	}
	return d.slots.PubSubNode(ctx, channel, sharded, maps.Keys(d.c.Nodes()))
}

// DialPubSub implements rediscore.Driver on a dedicated connection (Client.Dedicate; on a
// cluster, of the node's own client), never one that runs commands, with rueidis pub/sub hooks.
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
	done := dc.SetPubSubHooks(rueidis.PubSubHooks{
		// Hooks run in the connection's reader goroutine: no blocking there.
		OnMessage:      func(m rueidis.PubSubMessage) { events.Message(m.Channel, m.Message) },
		OnSubscription: func(s rueidis.PubSubSubscription) { events.Reply(s.Kind, s.Channel) },
	})
	return rediscore.WatchHooks(pubsub{dc, d.slots}, done, events), nil
}

// pubsub is a rediscore.PubSubConn on a rueidis dedicated connection.
type pubsub struct {
	dc    rueidis.DedicatedClient
	slots *rediscore.SlotMap // forgotten when a node answers MOVED
}

// Do sends commands in one DoMulti; rueidis returns once the server confirmed every channel.
func (p pubsub) Do(ctx context.Context, commands ...rediscore.PubSubCommand) error {
	b := p.dc.B()
	cmds := make(rueidis.Commands, len(commands))
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
func reply(res rueidis.RedisResult) (rediscore.Reply, error) {
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
