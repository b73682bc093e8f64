// Package redigo is the locker backend for Redigo (github.com/gomodule/redigo/redis): keep the
// *redis.Pool you have and get the reentrant lock of package locker on it.
//
//	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
//		return redis.DialContext(ctx, "tcp", "localhost:6379")
//	}}
//	client := locker.New(redigo.New(pool))
//
// Scripts run through Redigo script objects (EVALSHA, EVAL when the server lost its script
// cache), on a connection of the pool, bounded by the call's context; renewals of many leases
// go out in one pipeline on one connection.
//
// Redigo has no Redis Cluster support, and neither has this backend: point the pool at a single
// server, or at a proxy or a Sentinel-managed primary (a Dial that asks Sentinel for the
// current primary).
//
// Release notices come through pub/sub, sharded (SSUBSCRIBE) where the server supports it, on a
// few connections shared by every contended key (rediscore.WithNoticeConns). They are dialed with the
// pool's DialContext (or Dial) but are not the pool's: a subscription can last long and be idle
// for long, so it neither holds one of the pool's MaxActive slots nor reads with the
// connection's read timeout. When one breaks, its waiters are woken (notices may have been
// missed) and the Backend subscribes its channels again on a new connection, with a growing
// pause between failed attempts. Command connections are the pool's: set MaxActive (with Wait:
// true), or many goroutines waiting at once dial one each.
//
// With rediscore.WithReplicaAck, the script and WAIT go out on one connection of the pool; if the
// pool's Dial sets a read timeout (DialReadTimeout), the WAIT timeout must be shorter than it.
//
// The scripts and key layout are those of every Redis backend of this module, so clients of
// different drivers can share locks.
package redigo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gomodule/redigo/redis"

	"github.com/hashlock/locker/backend/rediscore"
)

// New returns the Redis backend (a locker.Locker) on p, which must have DialContext or Dial set,
// configured by opts (rediscore.Option: WithReplicaAck, WithNoticeConns; none by default). It is
// safe for concurrent use and needs no Close: p stays the caller's, and the Backend never closes
// it.
func New(p *redis.Pool, opts ...rediscore.Option) *rediscore.Backend {
	d := &driver{p: p, scripts: rediscore.PrepareScripts(func(src string) *redis.Script {
		// Key count -1: the number of keys varies per call (renew.lua), so each call passes
		// it as its first argument.
		return redis.NewScript(-1, src)
	})}
	d.names = make(map[*rediscore.Script][2]any)
	for _, s := range rediscore.Scripts() {
		d.names[s] = [2]any{s.SHA1, s.Source}
	}
	return rediscore.New(d, "redigo", opts...)
}

// driver implements rediscore.Driver with Redigo.
type driver struct {
	p       *redis.Pool
	scripts map[*rediscore.Script]*redis.Script // read-only after New
	names   map[*rediscore.Script][2]any        // each script's SHA1 and source, boxed once
}

func (d *driver) Cluster() bool { return false }

// Redigo connections have no I/O timeout unless the pool's Dial sets one: every call without a
// deadline gets rediscore.CallTimeout (rediscore.Bound), or a paused server would hang it.

func (d *driver) Eval(ctx context.Context, s *rediscore.Script, keys, args []string) (rediscore.Reply, error) {
	ctx, cancel := rediscore.Bound(ctx)
	defer cancel()
	conn, err := d.p.GetContext(ctx)
	if err != nil {
		return rediscore.Reply{}, err
	}
	defer conn.Close()
	cwt, ok := conn.(redis.ConnWithContext)
	if !ok {
		return reply(d.scripts[s].DoContext(ctx, conn, keysAndArgs(keys, args)...)) // says why not
	}
	// What redis.Script.DoContext does, with the script's hash boxed once, not per call, and
	// the arguments built once for EVALSHA.
	names := d.names[s]
	v, err := cwt.DoContext(ctx, "EVALSHA", evalArgs(names[0], keys, args)...)
	if e, ok := err.(redis.Error); ok && strings.HasPrefix(string(e), "NOSCRIPT ") {
		v, err = cwt.DoContext(ctx, "EVAL", evalArgs(names[1], keys, args)...)
	}
	return reply(v, err)
}

func (d *driver) EvalBatch(ctx context.Context, s *rediscore.Script, calls []rediscore.Call) []rediscore.Result {
	ctx, cancel := rediscore.Bound(ctx)
	defer cancel()
	results := make([]rediscore.Result, len(calls))
	if len(calls) == 0 {
		return results
	}
	conn, err := d.p.GetContext(ctx)
	if err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	defer conn.Close()
	script := d.scripts[s]
	run := func() ([]any, error) {
		for _, c := range calls {
			if err := script.SendHash(conn, keysAndArgs(c.Keys, c.Args)...); err != nil {
				return nil, err
			}
		}
		// Do("") flushes the pipeline and reads every pending reply, error replies included
		// as redis.Error values, within ctx.
		replies, err := redis.Values(redis.DoContext(conn, ctx, ""))
		if err == nil && len(replies) != len(calls) {
			err = fmt.Errorf("pipeline returned %d replies for %d calls", len(replies), len(calls))
		}
		return replies, err
	}
	replies, err := run()
	if err == nil && slices.ContainsFunc(replies, isNoScript) {
		// The server lost its script cache: load the script (Script.Load, with ctx) and run
		// the batch again, once.
		if _, lerr := redis.DoContext(conn, ctx, "SCRIPT", "LOAD", s.Source); lerr == nil {
			replies, err = run()
		}
	}
	for i := range results {
		if err != nil {
			results[i].Err = err
			continue
		}
		results[i].Reply, results[i].Err = reply(replies[i], nil)
	}
	return results
}

// EvalWait pipelines the script and WAIT on one connection of the pool.
func (d *driver) EvalWait(ctx context.Context, s *rediscore.Script, keys, args []string, replicas int, timeout time.Duration) (rediscore.Reply, int, error) {
	ctx, cancel := rediscore.Bound(ctx)
	defer cancel()
	conn, err := d.p.GetContext(ctx)
	if err != nil {
		return rediscore.Reply{}, 0, err
	}
	defer conn.Close()
	script := d.scripts[s]
	run := func(send func(redis.Conn, ...any) error) ([]any, error) {
		if err := send(conn, keysAndArgs(keys, args)...); err != nil {
			return nil, err
		}
		if err := conn.Send("WAIT", replicas, timeout.Milliseconds()); err != nil {
			return nil, err
		}
		replies, err := redis.Values(redis.DoContext(conn, ctx, ""))
		if err == nil && len(replies) != 2 {
			err = fmt.Errorf("pipeline returned %d replies for 2 commands", len(replies))
		}
		return replies, err
	}
	replies, err := run(script.SendHash)
	if err == nil && isNoScript(replies[0]) {
		replies, err = run(script.Send) // EVAL
	}
	if err != nil {
		return rediscore.Reply{}, 0, err
	}
	r, err := reply(replies[0], nil)
	if err != nil {
		return rediscore.Reply{}, 0, err
	}
	if e, ok := replies[1].(redis.Error); ok {
		return rediscore.Reply{}, 0, e
	}
	acks, err := redis.Int(replies[1], nil)
	return r, acks, err
}

// PubSubNode implements rediscore.Driver: a pool talks to one server.
func (d *driver) PubSubNode(context.Context, string, bool) (string, error) { return "", nil }

// DialPubSub implements rediscore.Driver on a connection of its own, dialled the way the pool
// dials. Redigo does not reconnect: the reader ends at the first error, and the Backend
// subscribes the connection's channels on a new one.
func (d *driver) DialPubSub(ctx context.Context, _ string, events rediscore.PubSubEvents) (rediscore.PubSubConn, error) {
	ctx, cancel := rediscore.Bound(ctx)
	defer cancel()
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	p := &pubsub{c: c}
	p.wg.Go(func() {
		for {
			// No read timeout: a connection may rightly hear nothing for long.
			v, err := redis.ReceiveWithTimeout(c, 0)
			if err != nil {
				if !p.closed.Load() { // not Close closing the connection
					events.Failed(err)
				}
				return
			}
			// Redigo's PubSubConn knows neither SSUBSCRIBE nor its replies: read both forms.
			k, channel := kind(v)
			switch k {
			case "message", "smessage":
				events.Message(channel, message(v))
			case "subscribe", "ssubscribe", "unsubscribe", "sunsubscribe":
				events.Reply(k, channel)
			}
		}
	})
	return p, nil
}

// pubsub is a rediscore.PubSubConn on a Redigo connection: one goroutine reads (Receive), the
// hub's writer sends, as Redigo allows.
type pubsub struct {
	c      redis.Conn
	closed atomic.Bool
	wg     sync.WaitGroup // the reader
}

// Do sends commands and flushes them once; the replies come to the reader.
func (p *pubsub) Do(_ context.Context, commands ...rediscore.PubSubCommand) error {
	for _, c := range commands {
		args := make([]any, len(c.Channels))
		for i, ch := range c.Channels {
			args[i] = ch
		}
		if err := p.c.Send(c.Name, args...); err != nil {
			return err
		}
	}
	return p.c.Flush()
}

func (p *pubsub) Close() {
	p.closed.Store(true)
	p.c.Close() // a Redigo connection's Close ends a Receive blocked in another goroutine
	p.wg.Wait()
}

// dial opens a connection of the subscriber's own, the way the pool dials its connections.
func (d *driver) dial(ctx context.Context) (redis.Conn, error) {
	switch {
	case d.p.DialContext != nil:
		return d.p.DialContext(ctx)
	case d.p.Dial != nil:
		return d.p.Dial()
	}
	return nil, errors.New("pool has neither DialContext nor Dial")
}

// kind returns the kind of a pub/sub reply ("message", "smessage", "subscribe"…) and its
// channel, or "".
func kind(v any) (kind, channel string) {
	if a, ok := v.([]any); ok && len(a) > 1 {
		k, _ := a[0].([]byte)
		ch, _ := a[1].([]byte)
		return string(k), string(ch)
	}
	return "", ""
}

// message returns the payload of a pushed message (its third element).
func message(v any) string {
	if a, ok := v.([]any); ok && len(a) > 2 {
		m, _ := a[2].([]byte)
		return string(m)
	}
	return ""
}

// reply converts a script reply: an integer, or an array of integers; an error reply (a
// redis.Error value, as a pipeline returns it) is the error.
func reply(v any, err error) (rediscore.Reply, error) {
	if err != nil {
		return rediscore.Reply{}, err
	}
	if e, ok := v.(redis.Error); ok {
		return rediscore.Reply{}, e
	}
	return rediscore.ReplyOf(v)
}

// isNoScript reports whether a pipelined reply is the server's NOSCRIPT error.
func isNoScript(v any) bool {
	e, ok := v.(redis.Error)
	return ok && strings.HasPrefix(string(e), "NOSCRIPT")
}

// evalArgs returns the arguments of EVALSHA (script: the hash) or EVAL (the source): script,
// the key count, keys and args. Each key and arg is shared, not copied (sharedString): keys and
// args must not change until the command is done.
func evalArgs(script any, keys, args []string) []any {
	out := make([]any, 0, 2+len(keys)+len(args))
	out = append(out, script)
	return appendKeysAndArgs(out, keys, args)
}

// keysAndArgs builds the arguments of a script whose key count is -1: the count, the keys, the
// arguments, shared as evalArgs shares them.
func keysAndArgs(keys, args []string) []any {
	return appendKeysAndArgs(make([]any, 0, 1+len(keys)+len(args)), keys, args)
}

func appendKeysAndArgs(out []any, keys, args []string) []any {
	out = append(out, len(keys)) // a small int: not boxed
	for i := range keys {
		out = append(out, sharedString(&keys[i]))
	}
	for i := range args {
		out = append(out, sharedString(&args[i]))
	}
	return out
}

// sharedString returns the interface value any(*p), which Redigo writes as a string, without
// the copy of the string header that boxing makes (one allocation per argument, 20 of the 44 of
// a Lock+Unlock): the interface points at *p itself. An interface holding a string is a pair of
// words, its type and a pointer to the header, and Go never writes through that pointer, so
// sharing the header is sound as long as *p does not change while the interface is in use.
func sharedString(p *string) any {
	v := any("") // a string's type word; the data word is replaced
	(*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] = unsafe.Pointer(p)
	return v
}
