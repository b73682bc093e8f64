package redigo

import (
	"time"

	"github.com/hashlock/locker/internal/redislock"
)

// An Option configures a Backend: see WithNoticeConns and WithReplicaAck.
type Option = redislock.Option

// WithReplicaAck makes the Backend wait, after every acquire and every release, until n replicas
// of the master have acknowledged it: the script is followed by WAIT n on the same connection, in
// the same round trip, for at most timeout (whole milliseconds; and at most half of what is left
// of the call's ctx, so that a refused acquire can still be taken back within it).
// With Redigo, they go out on one connection of the pool; if the pool's Dial sets a read
// timeout (DialReadTimeout), timeout must be shorter than it.
//
// When fewer than n acknowledge in time, a granted acquire is taken back at once and the call
// fails with an error wrapping locker.ErrUnavailable and ErrNotReplicated (Lock tries again
// within its ctx); a release has happened on the master but fails the same way (Unlock sends it
// again up to 3 times). Renewals wait too: one that too few acknowledged does not extend the
// lease, so a lease that the replicas stop confirming ends. An acknowledged lock
// survives the promotion of an acknowledging replica; a failover to one that did not acknowledge
// can still lose it: what it guarantees and what it costs are in docs/safety.md. A
// restricted user's ACL needs +wait.
//
// n must be at least 1 and timeout positive, or every call of the Backend returns an error
// wrapping locker.ErrInvalid. Default: no waiting.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return redislock.WithReplicaAck(n, timeout)
}

// ErrNotReplicated is wrapped, with locker.ErrUnavailable, by the error of an acquire or a
// release that fewer replicas acknowledged than WithReplicaAck asks for. It is the same value in
// every Redis backend of this module.
var ErrNotReplicated = redislock.ErrNotReplicated

// WithNoticeConns sets the most pub/sub connections the Backend opens to each server node (each
// master of a cluster) for release notices, whatever the number of keys its Clients wait on:
// each waited-on key is one channel on one of them. n must be at least 1. Default: 2.
func WithNoticeConns(n int) Option { return redislock.WithNoticeConns(n) }
