// Package memory is an in-process [locker.Locker] for users' unit tests and examples.
//
// It needs no set-up: call [New] (or use a zero [Backend]) and pass it to [locker.New]. State is
// per Backend value: two Backends, or two processes, never see each other's locks. Time is read
// only through the time package and no goroutine is started, so a Backend works inside a
// testing/synctest bubble, where lock timeouts and lease expiry run instantly.
package memory

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
	"github.com/hashlock/locker/internal/notify"
)

var (
	_ locker.Granter    = (*Backend)(nil)
	_ locker.Semaphorer = (*Backend)(nil)
)

// minSweep is the map size below which expired entries are never swept.
const minSweep = 32

// Backend is an in-memory [locker.Locker]. Its zero value is ready to use, and it is safe for
// concurrent use; it must not be copied after first use.
//
// Leases expire lazily: a lock acquired at t with a TTL of d is held until just before t+d and
// free from t+d on. Every holder's lease is its own: a reader's hold ends with its own lease,
// whatever the other readers' calls. Expired entries are forgotten when next touched, and all at once when the
// lock map has doubled in size since the previous sweep, so memory stays bounded by about twice
// the number of live locks.
type Backend struct {
	mu    sync.Mutex
	locks map[string]*entry
	swept int                                    // len(locks) after the last sweep
	subs  map[string]map[*notify.Waiter]struct{} // the subscriptions of each key

	queues      map[string]*waitQueue // the wait queue per key (dead ones until swept)
	sweptQueues int                   // len(queues) after the last sweep

	fences        map[string]uint64 // the fencing counter of every key ever locked with Fence
	requests      map[requestID]outcome
	sweptRequests int // len(requests) after the last sweep
}

// entry is a lock: exclusive (owner set, with holds >= 1, and perhaps shared holds of that
// owner, a downgrade) or shared (owner "", readers in shared), or a semaphore of limit permits
// (owner "", the permits' holders in shared). Every holder has a lease of its own: the exclusive
// holder's is expires; in shared mode each reader's is its reader.expires, and expires is the
// latest of them, so that the entry lives while any reader's lease runs.
type entry struct {
	owner   string            // the exclusive holder; "" in shared mode
	holds   int               // the exclusive holder's exclusive holds
	shared  map[string]reader // shared holds per owner
	limit   int               // a semaphore's permits (shared mode); 0 for a lock
	expires time.Time
}

// reader is an owner's shared holds, and in shared mode the end of its lease (the exclusive
// holder's shared holds share its lease, entry.expires); a semaphore's holder also has the
// fencing token its permit drew (0 when taken without Fence).
type reader struct {
	holds   int
	expires time.Time
	token   uint64
}

// total is owner's hold count on the entry, of both kinds.
func (e *entry) total(owner string) int {
	n := e.shared[owner].holds
	if e.owner == owner {
		n += e.holds
	}
	return n
}

// setLease sets owner's lease to end at until: the exclusive holder's, or in shared mode that
// reader's alone (never another reader's), the entry living until the latest of them.
func (e *entry) setLease(owner string, until time.Time) {
	if !e.isShared() {
		e.expires = until
		return
	}
	r := e.shared[owner]
	r.expires = until
	e.shared[owner] = r
	e.expires = e.latest()
}

// leave forgets owner's shared holds; in shared mode the entry then lives as long as the
// readers left.
func (e *entry) leave(owner string) {
	delete(e.shared, owner)
	if e.isShared() {
		e.expires = e.latest()
	}
}

// soonest returns when the first reader's lease ends (shared mode): when a semaphore's permit
// may be free.
func (e *entry) soonest() time.Time {
	var first time.Time
	for _, r := range e.shared {
		if first.IsZero() || r.expires.Before(first) {
			first = r.expires
		}
	}
	return first
}

// latest returns when the last reader's lease ends (shared mode).
func (e *entry) latest() time.Time {
	var last time.Time
	for _, r := range e.shared {
		last = maxTime(last, r.expires)
	}
	return last
}

// dropEnded forgets the readers whose lease has ended at now (shared mode): a hold whose lease
// ended counts for nothing, whoever still holds the key.
func (e *entry) dropEnded(now time.Time) {
	for owner, r := range e.shared {
		if !now.Before(r.expires) {
			delete(e.shared, owner)
		}
	}
	e.expires = e.latest()
}

// heldBy reports whether owner holds the entry in any way.
func (e *entry) heldBy(owner string) bool {
	return e != nil && e.total(owner) > 0
}

// isShared reports whether the entry is in shared mode.
func (e *entry) isShared() bool { return e.owner == "" }

// requestID names a remembered request: its key and ID.
type requestID struct{ key, id string }

// outcome is what a remembered request did: the holds it left (0 for a taken-back Acquire).
type outcome struct {
	holds   int
	expires time.Time
}

// New returns an empty Backend, ready to use.
func New() *Backend { return &Backend{} }

// Acquire creates the lock on req.Key for req.Owner with a lease of req.TTL (rounded up to a whole
// millisecond) and reports Holds == 1, or, when the owner already holds the key, adds a hold,
// resets the lease and reports the new hold count. When another owner holds the key it changes
// nothing and reports Holds == 0 with the holder's remaining lease in TTL; with req.Reentry, when
// req.Owner does not hold the key, it changes nothing and returns an error wrapping
// [locker.ErrNotHeld]. A TTL <= 0 or a negative Wait is refused with an error wrapping
// [locker.ErrInvalid]. Shared holds, the wait queue (Fair, Wait) and upgrades work as
// [locker.KindLocker] describes, and semaphores (Limit) as [locker.Semaphorer] does; request
// IDs and fencing tokens as [locker.AcquireRequest] does. The Backend keeps a fencing counter
// for every key that was ever locked with Fence, for its lifetime.
func (b *Backend) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if err := ctx.Err(); err != nil {
		return locker.Acquisition{}, err
	}
	ttl, err := roundTTL("acquire", req.Key, req.TTL)
	if err != nil {
		return locker.Acquisition{}, err
	}
	switch {
	case req.Wait < 0:
		return locker.Acquisition{}, display.Errorf("memory: acquire: wait %v: %w", req.Wait, locker.ErrInvalid)
	case req.Limit < 0 || req.Limit > MaxLimit:
		return locker.Acquisition{}, display.Errorf("memory: acquire: limit %d is not within [0, %d]: %w", req.Limit, MaxLimit, locker.ErrInvalid)
	case req.Limit > 0:
		req.Shared = true // a permit is a shared hold
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	e := b.live(req.Key, now)
	if req.ID != "" {
		if done, ok := b.marker(req.Key, req.ID, now); ok {
			// A call sent again: report the first outcome while its hold is there.
			if done > 0 && e.heldBy(req.Owner) {
				return locker.Acquisition{Holds: done, Token: b.token(req, e)}, nil
			}
			return locker.Acquisition{}, nil
		}
	}
	if e != nil && e.limit != req.Limit {
		return locker.Acquisition{}, mismatch(e.limit, req.Limit)
	}
	if req.Fresh && e.heldBy(req.Owner) {
		e.setLease(req.Owner, now.Add(ttl)) // this very request sent again, or a grant taken
		if req.Shared || req.Fair || req.Wait > 0 {
			b.remove(req.Key, req.Owner, now) // its grant record (a request that reads the queue)
		}
		return locker.Acquisition{Holds: e.total(req.Owner), Token: b.token(req, e)}, nil
	}
	if req.Reentry && !e.heldBy(req.Owner) {
		return locker.Acquisition{}, display.Errorf("memory: acquire: re-entry: %w", locker.ErrNotHeld)
	}
	switch {
	case e.heldBy(req.Owner) && !req.Shared && e.isShared():
		return locker.Acquisition{}, display.Errorf("memory: acquire: %w", locker.ErrUpgrade)
	case e.heldBy(req.Owner):
		// Re-entry, or a downgrade (a shared hold of the exclusive holder), whatever the queue.
		if req.Shared {
			e.addShared(req.Owner)
		} else {
			e.holds++
		}
	case !b.admits(req, e, now):
		if req.Wait > 0 {
			b.enqueue(req, now)
		}
		switch {
		case e == nil:
			return locker.Acquisition{}, nil // free, but others are ahead in the queue
		case e.limit > 0:
			return locker.Acquisition{TTL: e.soonest().Sub(now), Taken: len(e.shared)}, nil
		}
		return locker.Acquisition{TTL: e.expires.Sub(now)}, nil
	case e == nil:
		if b.locks == nil {
			b.locks = make(map[string]*entry)
		}
		e = &entry{limit: req.Limit}
		if req.Shared {
			b.addPermit(e, req)
		} else {
			e.owner, e.holds = req.Owner, 1
			b.advanceFence(req)
		}
		e.setLease(req.Owner, now.Add(ttl)) // before the sweep, which must keep it
		b.locks[req.Key] = e
		b.sweep(now)
		b.granted(req, now)
	default: // a new reader of a lock in shared mode, or a semaphore's new permit
		b.addPermit(e, req)
		b.granted(req, now)
	}
	e.setLease(req.Owner, now.Add(ttl))
	holds := e.total(req.Owner)
	if !req.Fresh {
		b.remember(req.Key, req.ID, holds, now)
	}
	return locker.Acquisition{Holds: holds, Token: b.token(req, e)}, nil
}

// MaxLimit is the largest semaphore the Backend accepts (locker.Semaphorer).
const MaxLimit = 1 << 20

// MaxLimit implements [locker.Semaphorer]: it returns the package's MaxLimit.
func (b *Backend) MaxLimit() int { return MaxLimit }

// mismatch is the error of a request with limit want on a key held with limit have (0: a lock).
func mismatch(have, want int) error {
	switch {
	case have == 0:
		return display.Errorf("memory: acquire: the key is held as a lock, not a semaphore of %d: %w", want, locker.ErrLimitMismatch)
	case want == 0:
		return display.Errorf("memory: acquire: the key is held as a semaphore of %d, not a lock: %w", have, locker.ErrLimitMismatch)
	}
	return display.Errorf("memory: acquire: the key is held as a semaphore of %d, not %d: %w", have, want, locker.ErrLimitMismatch)
}

// addPermit adds a new shared hold of req.Owner to e: a reader's, or on a semaphore a permit,
// which draws a fencing token of its own when req asks for one.
func (b *Backend) addPermit(e *entry, req locker.AcquireRequest) {
	e.addShared(req.Owner)
	if e.limit > 0 && req.Fence {
		if b.fences == nil {
			b.fences = make(map[string]uint64)
		}
		b.fences[req.Key]++
		r := e.shared[req.Owner]
		r.token = b.fences[req.Key]
		e.shared[req.Owner] = r
	}
}

// addShared adds a shared hold of owner.
func (e *entry) addShared(owner string) {
	if e.shared == nil {
		e.shared = make(map[string]reader)
	}
	r := e.shared[owner]
	r.holds++
	e.shared[owner] = r
}

// advanceFence advances the key's fencing counter for a new exclusive lock asked with Fence.
func (b *Backend) advanceFence(req locker.AcquireRequest) {
	if !req.Fence {
		return
	}
	if b.fences == nil {
		b.fences = make(map[string]uint64)
	}
	b.fences[req.Key]++
}

// RaiseFence implements [locker.FenceRaiser]: it sets key's fencing counter to token if lower.
func (b *Backend) RaiseFence(ctx context.Context, key string, token uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fences[key] < token {
		if b.fences == nil {
			b.fences = make(map[string]uint64)
		}
		b.fences[key] = token
	}
	return nil
}

// token is the fencing token to report for req on e: the key's counter, which a new lock with
// Fence advanced (it does not move while the lock is held); on a semaphore, the token of
// req.Owner's permit.
func (b *Backend) token(req locker.AcquireRequest, e *entry) uint64 {
	switch {
	case !req.Fence:
		return 0
	case e != nil && e.limit > 0:
		return e.shared[req.Owner].token
	}
	return b.fences[req.Key]
}

// Release removes one of req.Owner's holds on req.Key and reports how many remain, leaving the
// lease as it is. At zero the lock is deleted and every subscriber of the key is notified. When
// the owner does not hold the key (never did, expired, or forced away) it changes nothing and
// returns an error wrapping [locker.ErrNotHeld]. Request IDs and take-backs (Undo) work as
// [locker.ReleaseRequest] describes.
func (b *Backend) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	undo := req.Undo && req.ID != ""
	if req.ID != "" {
		done, ok := b.marker(req.Key, req.ID, now)
		switch {
		case undo && ((ok && done == 0) || (!ok && !req.Fresh)):
			b.remember(req.Key, req.ID, 0, now) // the Acquire, if it comes, is refused
			return 0, display.Errorf("memory: undo: %w", locker.ErrNotHeld)
		case undo:
			b.remember(req.Key, req.ID, 0, now)
		case ok:
			return done, nil // a call sent again: the first outcome
		}
	}
	e := b.live(req.Key, now)
	switch {
	case e == nil, req.Shared && e.shared[req.Owner].holds == 0, !req.Shared && !(undo && req.Fresh) && e.owner != req.Owner,
		undo && req.Fresh && !e.heldBy(req.Owner):
		return 0, display.Errorf("memory: release: %w", locker.ErrNotHeld)
	case undo && req.Fresh:
		// A fresh owner's holds all come from the acquire taken back.
		e.leave(req.Owner)
		if e.owner == req.Owner {
			e.owner, e.holds = "", 0
		}
		b.permitFreed(req.Key, e, now)
	case req.Shared:
		r := e.shared[req.Owner]
		r.holds--
		if r.holds > 0 {
			e.shared[req.Owner] = r
		} else {
			e.leave(req.Owner)
			b.permitFreed(req.Key, e, now)
		}
	default:
		e.holds--
		if e.holds == 0 {
			e.owner = "" // shared holds of the owner, if any, remain: shared mode
			if len(e.shared) > 0 {
				e.setLease(req.Owner, e.expires) // with the lease it had
				b.notify(req.Key, "", "")        // readers may join
			}
		}
	}
	left := e.total(req.Owner)
	switch {
	case undo:
	case left > 0 || !req.Fresh:
		b.remember(req.Key, req.ID, left, now)
	case req.ReplyWindow > 0:
		// A fresh owner's last release, only while its reply may be read: see ReleaseRequest.
		b.rememberFor(req.Key, req.ID, 0, now, req.ReplyWindow)
	}
	if e.owner == "" && len(e.shared) == 0 {
		delete(b.locks, req.Key)
		b.forgetGrant(req.Key, req.Owner, now) // the grant was taken, and is over
		b.grantHead(req.Key, now)              // and notify
	}
	return left, nil
}

// permitFreed follows the end of a permit of e, while other permits hold it (the release of the
// last one frees the key as any lock's does): when the head of key's queue asked for a permit of
// e's limit, it is granted the permit freed, else key's subscribers are notified.
func (b *Backend) permitFreed(key string, e *entry, now time.Time) {
	if e.limit > 0 && len(e.shared) > 0 && !b.grantPermit(key, e, now) {
		b.notify(key, "", "")
	}
}

// Renew resets the lease of each entry of batch whose owner holds its key to that entry's TTL
// (rounded up to a whole millisecond), all under one lock. The result has one error per entry:
// nil when renewed, an error wrapping [locker.ErrNotHeld] when the owner does not hold the key
// (another owner's lock is never touched), or one wrapping [locker.ErrInvalid] for a TTL <= 0.
// When ctx has ended, every entry gets ctx.Err() and nothing is renewed.
func (b *Backend) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := make([]error, len(batch))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for i, r := range batch {
		ttl, err := roundTTL("renew", r.Key, r.TTL)
		if err != nil {
			errs[i] = err
		} else if e := b.live(r.Key, now); e.heldBy(r.Owner) {
			e.setLease(r.Owner, now.Add(ttl))
		} else {
			errs[i] = display.Errorf("memory: renew: %w", locker.ErrNotHeld)
		}
	}
	return errs
}

// Inspect reports whether key is held, the holder's owner token and hold count, and the exact
// remaining lease (always > 0 for a held key), and every holder in Holders. For a key in shared
// mode it reports Shared, the number of Readers, their holds together, and as Owner the reader
// whose token sorts first; for a semaphore, its Limit, and as Owner, Holds and TTL what it
// reports for readers. Queued counts the live entries of the key's wait queue. The zero State
// means key is free and nobody waits. It changes no lock.
func (b *Backend) Inspect(ctx context.Context, key string) (locker.State, error) {
	if err := ctx.Err(); err != nil {
		return locker.State{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	st := locker.State{Queued: b.queued(key, now)}
	e := b.live(key, now)
	switch {
	case e == nil:
	case e.isShared():
		st.Locked, st.TTL = true, e.expires.Sub(now)
		if e.limit > 0 {
			st.Limit = e.limit
		} else {
			st.Shared, st.Readers = true, len(e.shared)
		}
		for owner, r := range e.shared {
			st.Holders = append(st.Holders, locker.Holder{Owner: owner, Holds: r.holds, TTL: r.expires.Sub(now)})
			st.Holds += r.holds
		}
		slices.SortFunc(st.Holders, func(a, b locker.Holder) int { return strings.Compare(a.Owner, b.Owner) })
		st.Owner = st.Holders[0].Owner // the same reader every time
	default:
		st.Locked, st.Owner, st.Holds, st.TTL = true, e.owner, e.total(e.owner), e.expires.Sub(now)
		st.Holders = []locker.Holder{{Owner: e.owner, Holds: st.Holds, TTL: st.TTL}}
	}
	return st, nil
}

// ForceRelease deletes the lock on key whoever holds it and notifies key's subscribers. It
// reports whether there was a live lock to delete; when there was none, nobody is notified.
func (b *Backend) ForceRelease(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live(key, time.Now()) == nil {
		return false, nil
	}
	delete(b.locks, key)
	b.notify(key, "", "")
	return true, nil
}

// Subscribe registers for release notices of key and returns at once with the subscription
// active. notices has a buffer of one and is sent to without blocking after every Release to
// zero and every ForceRelease that deleted a lock of key (never on expiry); a notice sent while
// one is pending is merged into it. cancel ends the subscription: no notice is sent once it has
// returned. It may be called any number of times, concurrently; it never closes notices. The
// subscription outlives ctx, which only bounds the call.
func (b *Backend) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w := notify.NewPlain()
	cancel, err := b.join(ctx, key, w)
	return w.Plain, cancel, err
}

// SubscribeAs implements [locker.Granter]: it is Subscribe for a waiter whose owner token is
// owner, which receives "" for a notice that grants nothing, the ID of the request that queued
// owner for the notice of a grant to owner, and nothing for a grant to another owner.
func (b *Backend) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	w := notify.NewOwner(owner)
	cancel, err := b.join(ctx, key, w)
	return w.Granted, cancel, err
}

// join adds the subscription w of key, as Subscribe says.
func (b *Backend) join(ctx context.Context, key string, w *notify.Waiter) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = make(map[string]map[*notify.Waiter]struct{})
	}
	if b.subs[key] == nil {
		b.subs[key] = make(map[*notify.Waiter]struct{})
	}
	b.subs[key][w] = struct{}{}
	cancel := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if set := b.subs[key]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(b.subs, key)
			}
		}
	}
	return cancel, nil
}

// live returns key's entry if a lease of it has not run out at now, deleting it if none has,
// and forgets the readers whose lease has.
func (b *Backend) live(key string, now time.Time) *entry {
	e := b.locks[key]
	if e != nil && e.isShared() {
		e.dropEnded(now)
	}
	if e != nil && !now.Before(e.expires) {
		delete(b.locks, key)
		return nil
	}
	return e
}

// sweep deletes every expired lock once the map has doubled since the last sweep.
func (b *Backend) sweep(now time.Time) {
	sweepExpired(b.locks, &b.swept, now, func(e *entry) time.Time { return e.expires })
}

// sweepExpired deletes the entries of m that expired at now, once m has doubled in size since
// the last sweep (whose size *swept keeps): the cost is amortised over the insertions.
func sweepExpired[K comparable, V any](m map[K]V, swept *int, now time.Time, expires func(V) time.Time) {
	if len(m) < 2*max(*swept, minSweep) {
		return
	}
	for k, v := range m {
		if !now.Before(expires(v)) {
			delete(m, k)
		}
	}
	*swept = len(m)
}

// marker returns the remembered outcome of request id on key, if it is remembered at now.
func (b *Backend) marker(key, id string, now time.Time) (int, bool) {
	o, ok := b.requests[requestID{key, id}]
	if !ok || !now.Before(o.expires) {
		return 0, false
	}
	return o.holds, true
}

// remember records the outcome of request id on key for locker.RequestWindow; an empty id is
// not recorded. Expired records are swept once the map has doubled since the last sweep.
func (b *Backend) remember(key, id string, holds int, now time.Time) {
	b.rememberFor(key, id, holds, now, locker.RequestWindow)
}

// rememberFor is remember for life, rounded up to whole milliseconds.
func (b *Backend) rememberFor(key, id string, holds int, now time.Time, life time.Duration) {
	if id == "" {
		return
	}
	if b.requests == nil {
		b.requests = make(map[requestID]outcome)
	}
	if r := life % time.Millisecond; r != 0 {
		life += time.Millisecond - r
	}
	b.requests[requestID{key, id}] = outcome{holds, now.Add(life)}
	sweepExpired(b.requests, &b.sweptRequests, now, func(o outcome) time.Time { return o.expires })
}

// notify sends the notice of a release that granted key to grantee with request ID id ("", "":
// one that granted nothing) to key's subscribers, without blocking (see notify.Waiter).
func (b *Backend) notify(key, grantee, id string) {
	for w := range b.subs[key] {
		w.Notify(grantee, id)
	}
}

// roundTTL rounds ttl up to a whole millisecond, refusing ttl <= 0.
func roundTTL(op, key string, ttl time.Duration) (time.Duration, error) {
	if ttl <= 0 {
		return 0, display.Errorf("memory: %s: ttl %v: %w", op, ttl, locker.ErrInvalid)
	}
	if r := ttl % time.Millisecond; r != 0 {
		if ttl > math.MaxInt64-time.Millisecond {
			return ttl - r, nil // rounding up would overflow
		}
		ttl += time.Millisecond - r
	}
	return ttl, nil
}
