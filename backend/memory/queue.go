package memory

import (
	"context"
	"time"

	"github.com/hashlock/locker"
)

// waitQueue is a key's wait queue: live and dead entries in arrival order, and the latest
// deadline of them, after which the whole queue is dead.
type waitQueue struct {
	entries []waiting
	last    time.Time
}

// waiting is one entry of a wait queue.
type waiting struct {
	owner    string
	kind     byte // 'x' fair exclusive, 's' fair shared, 'w' plain exclusive, 'r' plain shared
	deadline time.Time
}

// reader reports whether the entry is a reader's.
func (w waiting) reader() bool { return w.kind == 's' || w.kind == 'r' }

// kindOf is the queue kind of req.
func kindOf(req locker.AcquireRequest) byte {
	switch {
	case !req.Fair && req.Shared:
		return 'r'
	case !req.Fair:
		return 'w'
	case req.Shared:
		return 's'
	}
	return 'x'
}

// liveQueue returns key's queue without its dead entries at now (nil when none is live),
// forgetting a queue that has none.
func (b *Backend) liveQueue(key string, now time.Time) *waitQueue {
	q := b.queues[key]
	if q == nil {
		return nil
	}
	kept := q.entries[:0]
	for _, w := range q.entries {
		if now.Before(w.deadline) {
			kept = append(kept, w)
		}
	}
	clear(q.entries[len(kept):])
	q.entries = kept
	if len(kept) == 0 {
		delete(b.queues, key)
		return nil
	}
	return q
}

// admits reports whether req may take a new hold on the key, whose lock is e (nil when free),
// as locker.KindLocker says: exclusive on a free key, shared on a free or shared one, and the
// queue's live entries ahead of req's allow it (with no entry, all are ahead). A plain exclusive
// request that does not wait passes the queue, as on Redis, where it is not read.
func (b *Backend) admits(req locker.AcquireRequest, e *entry, now time.Time) bool {
	if e != nil && (!req.Shared || !e.isShared()) {
		return false
	}
	if !req.Shared && !req.Fair && req.Wait == 0 {
		return true
	}
	q := b.liveQueue(req.Key, now)
	if q == nil {
		return true
	}
	for _, w := range q.entries {
		switch {
		case w.owner == req.Owner:
			return true // every entry ahead allowed it
		case req.Fair && !(req.Shared && w.reader()):
			return false // ahead of a fair request, and not a reader ahead of a reader
		case !req.Fair && req.Shared != w.reader():
			return false // readers and writers take turns: neither starves
		}
	}
	return true
}

// enqueue puts req's owner at the tail of the key's queue for req.Wait, or, when it is already
// there, keeps its place and sets its deadline to req.Wait from now.
func (b *Backend) enqueue(req locker.AcquireRequest, now time.Time) {
	deadline := now.Add(req.Wait)
	q := b.liveQueue(req.Key, now)
	if q == nil {
		if b.queues == nil {
			b.queues = make(map[string]*waitQueue)
		}
		q = &waitQueue{}
		b.queues[req.Key] = q
		sweepExpired(b.queues, &b.sweptQueues, now, func(q *waitQueue) time.Time { return q.last })
	}
	if deadline.After(q.last) {
		q.last = deadline
	}
	for i := range q.entries {
		if q.entries[i].owner == req.Owner {
			q.entries[i].deadline = deadline
			return
		}
	}
	q.entries = append(q.entries, waiting{owner: req.Owner, kind: kindOf(req), deadline: deadline})
}

// granted takes req's owner out of the key's queue once req got a new hold. When req was shared
// and readers are now at the head, they are woken, since they may join.
func (b *Backend) granted(req locker.AcquireRequest, now time.Time) {
	if b.remove(req.Key, req.Owner, now) && req.Shared {
		if q := b.liveQueue(req.Key, now); q != nil && q.entries[0].reader() {
			b.notify(req.Key)
		}
	}
}

// remove takes owner's entry out of key's queue and reports whether live entries were behind
// it.
func (b *Backend) remove(key, owner string, now time.Time) bool {
	q := b.liveQueue(key, now)
	if q == nil {
		return false
	}
	for i, w := range q.entries {
		if w.owner != owner {
			continue
		}
		q.entries = append(q.entries[:i], q.entries[i+1:]...)
		if len(q.entries) == 0 {
			delete(b.queues, key)
		}
		return i < len(q.entries)
	}
	return false
}

// queued counts the live entries of key's queue.
func (b *Backend) queued(key string, now time.Time) int {
	if q := b.liveQueue(key, now); q != nil {
		return len(q.entries)
	}
	return 0
}

// Dequeue implements [locker.KindLocker]: it takes owner's entry out of key's wait queue, if
// there is one, and notifies key's subscribers when live entries were behind it.
func (b *Backend) Dequeue(ctx context.Context, key, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.remove(key, owner, time.Now()) {
		b.notify(key)
	}
	return nil
}
