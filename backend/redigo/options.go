package redigo

import (
	"time"

	"github.com/hashlock/locker/internal/redislock"
)

// An Option configures a Backend: see WithReplicaAck.
type Option = redislock.Option

// WithReplicaAck makes the Backend wait, after every acquire and every release, until n replicas
// of the master have acknowledged it: the script is followed by WAIT n on the same connection, in
// the same round trip, for at most timeout (whole milliseconds; and at most half of what is left
// of the call's ctx, so that a refused acquire can still be taken back within it).
// With Redigo, they go out on one connection of the pool; if the pool's Dial sets a read
// timeout (DialReadTimeout), timeout must be shorter than it.
//
// When fewer than n acknowledge in time, a granted acquire is taken back at once and the call
// fails with an error wrapping locker.ErrUnavailable and ErrNotReplicated: Lock tries again
// within its ctx, TryLock returns it. A release that fewer acknowledged has happened on the
// master, but fails the same way: Unlock sends it again (it is idempotent) up to 3 times, and
// returns the error if the replicas still do not acknowledge it (with the replicas gone, an
// Unlock takes about 3 timeouts). Renewals, Inspect and ForceUnlock do not wait.
//
// What it guarantees: when Lock returns a lease, n replicas have acknowledged the lock; if the
// master dies and one of them is promoted, the lock is held there, by the same owner, with the
// same hold count. What it does not: WAIT does not make Redis strongly consistent. A failover
// may promote a replica that did not acknowledge (when n is less than the number of replicas:
// Sentinel and Cluster prefer the most up-to-date replica, but do not promise it). An
// acknowledgement means the replica has the write in memory, not on disk. Renewals are not
// waited for: the promoted replica has the lease as of the last renewal that reached it, so the
// lease may run out there while the holder's lease context is live, and another owner may get
// the lock before the holder's next renewal finds it gone. And the lease then runs on the
// promoted replica's clock.
//
// Cost: one more command in the acquire's and the release's round trip, and the time the replicas
// take to acknowledge (at least one round trip between master and replica). A restricted user's
// ACL needs the command (+wait).
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
