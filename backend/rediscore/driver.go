package rediscore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Driver is what a Redis adapter implements: its client's way to run the canonical scripts and
// to subscribe to release notices. Everything else (arguments, replies, batching, sharing
// subscriptions, error meaning) is done once in Backend.
type Driver interface {
	// Eval runs s with keys and args through the driver's script object: EVALSHA, then EVAL
	// when the server answers NOSCRIPT (after SCRIPT FLUSH or a restart). It returns the reply
	// as a Reply, or the driver's error.
	Eval(ctx context.Context, s *Script, keys, args []string) (Reply, error)

	// EvalBatch runs calls of s in as few round trips as the driver allows (a pipeline; on a
	// cluster, one per node), with the same NOSCRIPT fallback, and returns one Result per call,
	// in order.
	EvalBatch(ctx context.Context, s *Script, calls []Call) []Result

	// EvalWait runs s as Eval does, then WAIT replicas timeout on the same connection, sent
	// with the script in one round trip (on a cluster, to the master of keys[0]'s slot), and
	// returns the script's reply and WAIT's: how many replicas acknowledged every write of
	// that connection so far. When the script is refused with NOSCRIPT it runs EVAL, then WAIT
	// again, the same way. timeout is whole milliseconds, at least 1; a driver that cannot
	// read a reply that late (go-redis: its ReadTimeout) waits less. An error of the script is
	// returned as the error.
	EvalWait(ctx context.Context, s *Script, keys, args []string, replicas int, timeout time.Duration) (Reply, int, error)

	// PubSubNode names the server node whose pub/sub carries channel's notices: the master of
	// the channel's slot for a sharded channel on a cluster (SSUBSCRIBE), the shard of a
	// client-side sharded client, and "" for any other case (one server, or unsharded channels,
	// which a cluster sends to every node). Connections are shared per name.
	PubSubNode(ctx context.Context, channel string, sharded bool) (string, error)

	// DialPubSub opens a pub/sub connection of the driver's own (never one that runs commands)
	// to node, a name PubSubNode returned. The connection reports what it hears to events, from
	// one goroutine at a time, in the order the server sent it, until it ends or is closed.
	DialPubSub(ctx context.Context, node string, events PubSubEvents) (PubSubConn, error)

	// Cluster reports whether the client spreads keys over the nodes of a Redis Cluster, where
	// a multi-key script call needs all its keys in one slot.
	Cluster() bool
}

// PubSubConn is one pub/sub connection of a Driver, carrying any number of channels.
type PubSubConn interface {
	// Do sends commands, in order, in as few round trips as the driver allows. It may return
	// before the server replied: the replies come through PubSubEvents.Reply, and an error reply
	// through PubSubEvents.Failed or as Do's error.
	Do(ctx context.Context, commands ...PubSubCommand) error
	// Close ends the connection. Events that the driver reports meanwhile are ignored.
	Close()
}

// PubSubCommand is one command of a PubSubConn: Name is "SUBSCRIBE", "SSUBSCRIBE",
// "UNSUBSCRIBE" or "SUNSUBSCRIBE"; the Channels of a sharded one are all in one slot.
type PubSubCommand struct {
	Name     string
	Channels []string
}

// PubSubEvents receives what a PubSubConn hears. Its methods may be called from any goroutine.
type PubSubEvents interface {
	// Message is a message published on channel.
	Message(channel, message string)
	// Reply is the server's confirmation of a subscription change of channel — kind is
	// "subscribe", "ssubscribe", "unsubscribe" or "sunsubscribe", one per channel — or an
	// unsubscription the server sent by itself (a sharded channel whose slot moved).
	Reply(kind, channel string)
	// Failed reports an error reply, or that the connection ended with err; the Backend then
	// closes the connection and subscribes its channels again on another one.
	Failed(err error)
}

// Reply is a script's reply: Int for an integer reply; for an array, Array holds its integers
// and Text its string element, if any (a script returns at most one, as its last element).
// Array may be shared with other replies (ReplyOf): read it, never write to it.
type Reply struct {
	Int   int64
	Array []int64
	Text  string
}

// Call is one script call of a batch.
type Call struct {
	Keys, Args []string
}

// Result is the outcome of one Call.
type Result struct {
	Reply Reply
	Err   error
}

// IsUnknownCommand reports whether err is a server's answer to a command it does not know
// ("ERR unknown command …"), as SSUBSCRIBE gets from Redis before 7 and from miniredis: the
// Backend then subscribes unsharded.
func IsUnknownCommand(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command")
}

// ReplyOf converts a script reply decoded the usual Go way (go-redis, Redigo): an int64, or a
// []any of int64 and at most one string ([]byte with Redigo).
func ReplyOf(v any) (Reply, error) {
	switch v := v.(type) {
	case int64:
		return Reply{Int: v}, nil
	case []any:
		r := Reply{Array: make([]int64, 0, len(v))}
		for _, x := range v {
			switch x := x.(type) {
			case int64:
				r.Array = append(r.Array, x)
			case string:
				r.Text = x
			case []byte:
				r.Text = string(x)
			default:
				return Reply{}, fmt.Errorf("unexpected script reply element %T", x)
			}
		}
		return r, nil
	}
	return Reply{}, fmt.Errorf("unexpected script reply %T", v)
}
