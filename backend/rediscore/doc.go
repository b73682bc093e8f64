// Package rediscore is the Redis backend of locker, written once for every Redis client: a
// locker.Locker (Backend) that runs the canonical Lua scripts through a small Driver interface,
// with the key and channel layout, release notices over a few shared connections, and replica
// acknowledgement (WithReplicaAck).
//
// Users get a Backend from an adapter of their client — backend/goredis, backend/rueidis,
// backend/redigo — and pass its options from here:
//
//	b := goredis.New(rdb, rediscore.WithReplicaAck(1, time.Second))
//	client := locker.New(b)
//
// To plug any other RESP client, implement Driver (script calls with the NOSCRIPT fallback, a
// pipeline of script calls, WAIT after a script, a pub/sub connection) and pass it to New; the
// adapters of this module are examples of 200 to 300 lines. Run the conformance suite
// (conformance.Run) on the result.
//
// The protocol, whichever driver speaks it:
//
//   - A lock is a hash at the lock's key: field = owner token, value = hold count, and the
//     marker field "" = "locker" (held exclusively; "locker:quiet" while nobody else asked for
//     it, so that its release skips the queue and the notice) or "locker:shared" (held by
//     readers) that tells a lock from anybody else's hash; the key's TTL is the lease. An exclusive holder
//     that also has shared holds (a downgrade) has the value "<exclusive>:<shared>". Readers
//     that overlap each keep a lease of their own, "<holds>@<end>", and the key's TTL runs just
//     past the latest. A semaphore of n permits (locker.Semaphorer, n at most MaxLimit, 256) has
//     the marker "locker:permits:<n>" and one field per permit's holder, "<holds>@<end>" even
//     alone, and, when the permit drew a fencing token, "#<token>" after it. Scripts
//     take the key in KEYS, with its companions (request markers, the fencing counter, the wait
//     queue: keys.go), and touch no other key. A key that holds anything else is never
//     written, renewed or deleted, and nor is a companion that holds anything but what the
//     scripts write there: they check every key before they write and answer NOTALOCK
//     (lua/lib.lua, which has the whole layout).
//   - The wait queue (QueueKey) is a hash of waiting owners with their ticket, kind and
//     deadline on the server's clock, for fair locks and for readers and writers that wait
//     (so that they take turns). Only requests that are shared, a permit's, fair or waiting
//     read it: a plain TryLock costs what it did before the queue existed.
//   - Release notices go to the channel Channel(key), which hashes to the lock's cluster slot:
//     by SPUBLISH where the server has it (Redis >= 7), else by PUBLISH; subscribers use
//     SSUBSCRIBE or SUBSCRIBE to match.
//   - Leases are whole milliseconds, rounded up.
//   - With WithReplicaAck, an acquire, a release, a hand-off, a dequeue or a renewal is followed by
//     WAIT on the same connection (Driver.EvalWait), and an acquire that too few replicas
//     acknowledged is taken back.
package rediscore
