package rediscore

import (
	"context"
	_ "embed"
)

// DequeueScript is lua/dequeue.lua, which Dequeue runs; the file describes its keys, arguments and
// reply.
var DequeueScript = newScript("dequeue", dequeueLua)

//go:embed lua/dequeue.lua
var dequeueLua string

// Dequeue implements locker.KindLocker with dequeue.lua: it takes owner's entry out of key's
// wait queue (QueueKey), if there is one, and sends a release notice when live entries were
// behind it; an unconfirmed grant of key to owner is released (locker.Granter). A queue key that
// holds anything else is left as it is (an error wrapping locker.ErrNotALock). With
// WithReplicaAck, a dequeue that too few replicas acknowledged returns an error wrapping
// locker.ErrUnavailable and ErrNotReplicated, although the master dequeued (a failover may bring
// the entry back until its wait ends).
func (b *Backend) Dequeue(ctx context.Context, key, owner string) error {
	if b.opts.err != nil {
		return b.opts.err
	}
	keys, args := []string{QueueKey(key), key, FenceKey(key)}, []string{owner, Channel(key)}
	_, acks, err := b.write(ctx, DequeueScript, keys, args) // acks: replicas that acknowledged the dequeue
	if err != nil {
		return b.fail(ctx, "dequeue", err)
	}
	if acks < b.opts.acks {
		return b.unreplicated("dequeue", acks, "; dequeued on the master")
	}
	return nil
}
