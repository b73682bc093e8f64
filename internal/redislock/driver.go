package redislock

import (
	"context"
	"errors"
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

	// Subscribe subscribes to channel — SSUBSCRIBE when sharded, else SUBSCRIBE — on a
	// connection of the driver's own (never one that runs commands), and returns once the
	// server has confirmed it. It calls notify for every message on the channel (and may call
	// it when in doubt, e.g. after the driver re-subscribed by itself). When the subscription
	// ends without stop — its connection broke, or the server ended it — it calls lost, once,
	// and Backend subscribes again. stop ends the subscription and frees its connection; it is
	// called exactly once, also after lost. When sharded and the server does not know
	// SSUBSCRIBE, it returns an error wrapping errors.ErrUnsupported, and Backend subscribes
	// again unsharded.
	Subscribe(ctx context.Context, channel string, sharded bool, notify, lost func()) (stop func(), err error)

	// Cluster reports whether the client spreads keys over the nodes of a Redis Cluster, where
	// a multi-key script call needs all its keys in one slot.
	Cluster() bool
}

// Reply is a script's reply: Int for an integer reply; for an array, Array holds its integers
// and Text its string element, if any (a script returns at most one, as its last element).
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

// ErrUnsupported is what a Driver's Subscribe wraps when the server lacks the command.
var ErrUnsupported = errors.ErrUnsupported

// IsUnknownCommand reports whether err is a server's answer to a command it does not know
// ("ERR unknown command …"), as SSUBSCRIBE gets from Redis before 7 and from miniredis.
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
