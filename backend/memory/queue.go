package memory

import (
	"context"
	"time"

	"github.com/hashlock/locker"
)

// waitQueue is a key's wait queue: live and dead entries in arrival order, the grant records
// (releases gave the key to their owners, who have not taken it yet: see locker.Granter), and
// the latest deadline of them, after which the whole queue is dead.
type waitQueue struct {
	entries []waiting
	granted []waiting
	last    time.Time
}

// waiting is one entry of a wait queue, or a grant record (kind 'g', its deadline the grant's
// lease).
type waiting struct {
	owner    string
	kind     byte // 'x' fair exclusive, 's' fair shared, 'w' plain exclusive, 'r' plain shared, 'g' granted
	deadline time.Time
	grant    time.Duration // the lease of a grant it asks for (locker.AcquireRequest.Grant); 0: none
	fence    bool          // the grant draws a fencing token
	limit    int           // the grant is of a permit of a semaphore of limit; 0: of the lock
	id       string        // the ID of the request that last queued it, told to it with a grant
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
	q.entries = liveOnly(q.entries, now)
	q.granted = liveOnly(q.granted, now)
	if len(q.entries) == 0 && len(q.granted) == 0 {
		delete(b.queues, key)
		return nil
	}
	return q
}

// liveOnly returns the entries of list whose deadline has not passed at now, in place.
func liveOnly(list []waiting, now time.Time) []waiting {
	kept := list[:0]
	for _, w := range list {
		if now.Before(w.deadline) {
			kept = append(kept, w)
		}
	}
	clear(list[len(kept):])
	return kept
}

// admits reports whether req may take a new hold on the key, whose lock is e (nil when free),
// as locker.KindLocker says: exclusive on a free key, shared on a free or shared one, a permit
// on a free key or a semaphore (of req.Limit: the caller checked) with a permit free, and the
// queue's live entries ahead of req's allow it (with no entry, all are ahead). A plain exclusive
// request that does not wait, and a plain permit request, pass the queue, as on Redis, where it
// is not read.
func (b *Backend) admits(req locker.AcquireRequest, e *entry, now time.Time) bool {
	permit := req.Limit > 0
	switch {
	case e != nil && (!req.Shared || !e.isShared()):
		return false
	case permit && e != nil && len(e.shared) >= req.Limit:
		return false
	case permit && !req.Fair, !req.Shared && !req.Fair && req.Wait == 0:
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
		case permit:
			return false // a fair permit request passes nobody
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
	var grant time.Duration
	if req.Grant > 0 && req.Fresh && (!req.Shared || req.Limit > 0) {
		grant, _ = roundTTL("acquire", req.Key, req.Grant)
	}
	for i := range q.entries {
		if w := &q.entries[i]; w.owner == req.Owner {
			w.deadline, w.grant, w.fence, w.id, w.limit = deadline, grant, req.Fence, req.ID, req.Limit
			return
		}
	}
	q.granted = without(q.granted, req.Owner) // a grant that lapsed: the owner queues anew
	q.entries = append(q.entries, waiting{owner: req.Owner, kind: kindOf(req), deadline: deadline, grant: grant, fence: req.Fence, id: req.ID, limit: req.Limit})
}

// without returns list without owner's entry, in place.
func without(list []waiting, owner string) []waiting {
	for i, w := range list {
		if w.owner == owner {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// granted takes req's owner out of the key's queue once req got a new hold. When req was shared
// and readers are now at the head, they are woken, since they may join.
func (b *Backend) granted(req locker.AcquireRequest, now time.Time) {
	if behind, _ := b.remove(req.Key, req.Owner, now); behind && req.Shared {
		if q := b.liveQueue(req.Key, now); q != nil && len(q.entries) > 0 && q.entries[0].reader() {
			b.notify(req.Key, "", "")
		}
	}
}

// remove takes owner's entry, or its grant record, out of key's queue and reports whether live
// entries were behind it, and whether it was a grant record.
func (b *Backend) remove(key, owner string, now time.Time) (behind, granted bool) {
	q := b.liveQueue(key, now)
	if q == nil {
		return false, false
	}
	defer func() {
		if len(q.entries) == 0 && len(q.granted) == 0 {
			delete(b.queues, key)
		}
	}()
	for i, w := range q.entries {
		if w.owner == owner {
			q.entries = append(q.entries[:i], q.entries[i+1:]...)
			return i < len(q.entries), false
		}
	}
	n := len(q.granted)
	q.granted = without(q.granted, owner)
	return false, len(q.granted) < n
}

// forgetGrant takes owner's grant record, if any, out of key's queue.
func (b *Backend) forgetGrant(key, owner string, now time.Time) {
	if q := b.liveQueue(key, now); q != nil {
		q.granted = without(q.granted, owner)
		if len(q.entries) == 0 && len(q.granted) == 0 {
			delete(b.queues, key)
		}
	}
}

// grantHead gives key, just freed, to the head of its queue when the head asked for a grant
// (locker.AcquireRequest.Grant): the lock, or a permit of a new semaphore, as the Redis
// backends' release.lua does, and notifies key's subscribers (of the grantee only, after a
// grant).
func (b *Backend) grantHead(key string, now time.Time) {
	q := b.liveQueue(key, now)
	if q == nil || len(q.entries) == 0 || q.entries[0].grant == 0 {
		b.notify(key, "", "")
		return
	}
	head := q.entries[0]
	if b.locks == nil {
		b.locks = make(map[string]*entry)
	}
	if head.limit > 0 {
		e := &entry{limit: head.limit}
		b.locks[key] = e
		b.grantPermit(key, e, now)
		return
	}
	q.entries = q.entries[1:]
	b.locks[key] = &entry{owner: head.owner, holds: 1, expires: now.Add(head.grant)}
	b.advanceFence(locker.AcquireRequest{Key: key, Fence: head.fence})
	b.recordGrant(key, q, head, now)
}

// grantPermit gives a permit of the semaphore e on key to the head of key's queue, when the head
// asked for a permit of e's limit: one shared hold with the grant's lease (and a token of its
// own, when it asked for one), and notifies the grantee. It reports whether it granted one.
func (b *Backend) grantPermit(key string, e *entry, now time.Time) bool {
	q := b.liveQueue(key, now)
	if q == nil || len(q.entries) == 0 || q.entries[0].grant == 0 || q.entries[0].limit != e.limit || len(e.shared) >= e.limit {
		return false
	}
	head := q.entries[0]
	q.entries = q.entries[1:]
	b.addPermit(e, locker.AcquireRequest{Key: key, Owner: head.owner, Fence: head.fence, Limit: e.limit})
	e.setLease(head.owner, now.Add(head.grant))
	b.recordGrant(key, q, head, now)
	return true
}

// recordGrant records the grant to head (taken out of q.entries) in key's queue, until its
// lease ends, and notifies the grantee.
func (b *Backend) recordGrant(key string, q *waitQueue, head waiting, now time.Time) {
	q.granted = append(q.granted, waiting{owner: head.owner, kind: 'g', deadline: now.Add(head.grant)})
	q.last = maxTime(q.last, now.Add(head.grant))
	b.notify(key, head.owner, head.id)
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// queued counts the live entries of key's queue (grant records are none).
func (b *Backend) queued(key string, now time.Time) int {
	if q := b.liveQueue(key, now); q != nil {
		return len(q.entries)
	}
	return 0
}

// Dequeue implements [locker.KindLocker]: it takes owner's entry out of key's wait queue, if
// there is one, and notifies key's subscribers when live entries were behind it. When the entry
// is a grant record and owner still holds key exclusively, or one permit of it, once, that hold
// is released (and the key, or the permit, passes to the next in the queue, as after a Release).
func (b *Backend) Dequeue(ctx context.Context, key, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	behind, granted := b.remove(key, owner, now)
	switch e := b.live(key, now); {
	case granted && e != nil && e.owner == owner && e.holds == 1 && len(e.shared) == 0:
		delete(b.locks, key)
		b.grantHead(key, now)
	case granted && e != nil && e.limit > 0 && e.shared[owner].holds == 1:
		e.leave(owner)
		if len(e.shared) == 0 {
			delete(b.locks, key)
			b.grantHead(key, now)
		} else {
			b.permitFreed(key, e, now)
		}
	case behind:
		b.notify(key, "", "")
	}
	return nil
}
