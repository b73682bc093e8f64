// Package locker is a reentrant, leased, distributed lock for Go.
//
// What a user needs: [New] (with a backend from backend/…, and [Option]s such as [WithTTL],
// [WithRetry] with a [RetryStrategy], [WithFencing], [WithObserver]), the [Client] it returns ([Client.Lock], [Client.TryLock],
// [Client.RLock], [Client.Acquire] for a semaphore's permit, [Client.Inspect], [Client.ForceUnlock], [Client.Close]), the [Lease] a lock
// gives ([Lease.Unlock], [Lease.Context]), [State], and the errors ([ErrNotObtained],
// [ErrNotHeld], [ErrLockLost], [ErrUnavailable]…), tested with errors.Is. The rest — [Locker],
// [KindLocker], [Semaphorer], [HandOffer], [Granter], [FenceRaiser] and their request and result types — is the
// contract a backend implements: a user who does not write one can skip it.
//
// A lock is a hash per key: one field per owner token, whose value is that owner's hold count. An
// owner that already holds a key may lock it again (re-enter); the key is free again when every
// hold has been released, or when its lease (TTL) runs out. While a [Lease] is held, the [Client]'s
// watchdog renews it, and the lease's context ends the moment the hold is lost or may have been.
//
// The package has two layers:
//
//   - [Locker] is the contract a storage backend implements: a handful of atomic operations, one
//     round trip each. Backends live under backend/ (memory, one per Redis driver, postgres),
//     and the conformance package is that contract made executable.
//   - [Client] is written once on top of any Locker: owner tokens, re-entry through contexts,
//     waiting and retries, the watchdog and the lost-lease signal.
//
// Start with [New], [Client.Lock] and [Lease.Unlock].
package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// Locker is the contract between the [Client] and a storage backend: an atomic, leased,
// reentrant lock per key. Every method is one atomic step on the backend (one round trip for a
// network backend), is safe for concurrent use and never blocks past ctx. A lock is held by at
// most one owner, with a hold count and a lease; a key that is not held does not exist on the
// backend, and a key that holds anything else is left as it is (Acquire, Release, Inspect and
// ForceRelease return an error wrapping ErrNotALock; Renew reports it not held). Errors wrap
// ErrNotHeld where a method says so, ErrUnavailable when the store cannot answer for now (the
// Client retries), or ctx's error; only a call that failed with none of ErrNotHeld, ErrInvalid,
// ErrNotALock, ErrUpgrade and ErrLimitMismatch may have taken effect. Durations are whole milliseconds, rounded up. The
// conformance package checks an implementation: what it does not check is not guaranteed. The
// contract in full: docs/guarantees.md, "The backend contract".
type Locker interface {
	// Acquire creates the lock on req.Key for req.Owner with a lease of req.TTL, or, when the
	// owner already holds it, adds one hold and resets the owner's lease (re-entry). It reports the
	// owner's hold count after the call (1 for a new lock). When another owner holds the key it
	// changes nothing and reports Holds == 0 with that holder's remaining lease in TTL. With
	// req.Reentry, it never creates a lock: when req.Owner holds none on the key, it changes
	// nothing and returns an error wrapping ErrNotHeld.
	//
	// With req.ID set, the call is idempotent (see AcquireRequest.ID); with req.Fence, a granted
	// call also reports the lock's fencing token (see Acquisition.Token).
	Acquire(ctx context.Context, req AcquireRequest) (Acquisition, error)

	// Release removes one of req.Owner's holds on req.Key and reports how many remain (of
	// every kind, as Acquisition.Holds counts them). At zero the key is deleted and a release
	// notice is sent to the key's subscribers. The owner's lease is left as it is while its holds
	// remain. When the owner holds no lock on the key (it never did,
	// it expired, or it was forced away) Release changes nothing and returns an error wrapping
	// ErrNotHeld.
	//
	// With req.ID set, the call is idempotent; with req.Undo, it takes back the hold of one
	// earlier Acquire instead (see ReleaseRequest).
	Release(ctx context.Context, req ReleaseRequest) (remaining int, err error)

	// Renew resets the lease of every entry of batch whose owner still holds its key (that
	// owner's lease only), in one round trip where the backend allows (a script over many keys,
	// or a pipeline). It never extends or shortens a hold of any other owner. It returns one error per entry, at the same index:
	// nil when renewed, an error wrapping ErrNotHeld when the owner no longer holds the key, or
	// another error when the outcome is unknown.
	Renew(ctx context.Context, batch []Renewal) []error

	// Inspect reports the state of key: whether it is held, the holder's owner token and hold
	// count, and the remaining lease. It changes nothing.
	Inspect(ctx context.Context, key string) (State, error)

	// ForceRelease deletes the lock on key whoever holds it, sends a release notice, and reports
	// whether there was a lock to delete. A key that is not a lock is left as it is (ErrNotALock).
	ForceRelease(ctx context.Context, key string) (bool, error)

	// Subscribe starts listening for release notices of key: after every forced release of key,
	// every release to zero of a lock that was refused to some request since it was taken
	// (a waiter subscribes, then asks again before it waits), and every release of a
	// semaphore's permit that frees it (its holder's last hold: see Semaphorer), at least one value is sent on
	// notices (sends never block: notices that arrive while one is pending are merged). A notice
	// may also be sent without a release (after a reconnect, say), so the receiver must check the
	// lock again; notices can be missed, so the receiver must also wake on a timer. Subscribe
	// returns once the subscription is active. cancel ends the subscription and may be called
	// more than once. A backend without notices returns an error wrapping errors.ErrUnsupported,
	// and the Client falls back to timers.
	Subscribe(ctx context.Context, key string) (notices <-chan struct{}, cancel func(), err error)
}

// KindLocker is implemented by a [Locker] that also has shared (read) holds and a wait queue per
// key, for Client.RLock and WithFair; on another backend those return an error wrapping
// errors.ErrUnsupported. Every backend of this module but backend/quorum implements it.
//
// A key is free, held exclusively by one owner, or held shared by one or more owners, each with a
// hold count and a lease of its own that only its own calls set; a hold whose lease has ended
// counts for nothing. The queue makes readers and writers take turns as with sync.RWMutex, and
// fair requests go in their order of arrival. An upgrade (an exclusive request of an owner that
// holds the key only shared) changes nothing and returns an error wrapping ErrUpgrade. Queue
// entries end when granted, at Dequeue, or Wait after their last refresh. The admission rules,
// notices and fencing of shared holds: docs/guarantees.md, "The backend contract".
type KindLocker interface {
	Locker
	// Dequeue removes owner's entry from key's wait queue, if there is one (a waiter that gives
	// up), and sends a release notice when entries were behind it. A missing entry is no error.
	// On a Granter, it also gives back a grant that owner did not take (AcquireRequest.Grant):
	// while owner holds key exclusively, or one permit of it, once, from that grant, that hold
	// is released.
	Dequeue(ctx context.Context, key, owner string) error
}

// Semaphorer is implemented by a [KindLocker] whose Acquire honours AcquireRequest.Limit, for
// Client.Acquire (elsewhere that returns errors.ErrUnsupported); every backend of this module but
// backend/quorum implements it. A semaphore of n is a key that at most n owners hold at once,
// each with a permit: a shared hold with a hold count and a lease of its own, as a reader's. n is
// stored with the key by its first permit and kept while any permit's lease runs; a request with
// another limit (a lock's is 0) on a held key changes nothing and fails with ErrLimitMismatch,
// checked first. With Fence each new permit draws a new token, which its re-entries report. A
// fair permit request passes no live queue entry ahead of its owner's, a plain one passes the
// queue; a waiting one may ask for a grant. A Release that ends a permit sends a notice; Inspect
// reports Limit and Holders; HandOff passes a permit. The rules in full: docs/semaphore.md.
type Semaphorer interface {
	KindLocker
	// MaxLimit is the largest Limit the backend accepts: the Client refuses a larger n with
	// ErrInvalid before any call.
	MaxLimit() int
}

// HandOffer is implemented by a [KindLocker] that can pass an exclusive hold from one owner to
// another in one atomic step, the key staying held throughout: no release, no notice, no
// window in which another owner could take it. It lets a Client hand a lock to its next Lock
// call on the key without a release and an acquire. It never consults the wait queue: the
// caller, told how many others wait (HandOffResult.Queued), bounds its hand-offs so that they get
// their turn. Every backend of this module that implements KindLocker implements it.
type HandOffer interface {
	KindLocker
	// HandOff passes the key from req.From to req.To, as HandOffRequest says.
	HandOff(ctx context.Context, req HandOffRequest) (HandOffResult, error)
}

// HandOffResult is what [HandOffer.HandOff] reports.
type HandOffResult struct {
	Holds  int    // To's hold count after the call: 1, more when To held the key already
	Token  uint64 // with Fence, To's fencing token (the latest when To held the key); else 0
	Queued int    // the live wait queue entries of owners other than To: others wait
}

// HandOffRequest is the argument of [HandOffer.HandOff]. When From holds the key exclusively
// with exactly one hold and no shared hold (it is about to release its last), From's hold ends
// and To holds the key exclusively with one hold: the lease is reset to TTL, To's wait queue
// entry (if any) ends, and with Fence a new fencing token is drawn (as for a new lock). On a
// Semaphorer, when From holds one permit of a semaphore with exactly one hold, To takes that
// permit likewise: one hold, a lease of TTL, its queue entry ended, with Fence a new token; the
// key keeps its limit, and no other permit changes. When To
// already holds the key, the hand-off is taken as sent again (its reply was lost): the lease is
// reset and To's hold count and the latest token are reported. Otherwise nothing changes and
// HandOff returns an error wrapping ErrNotHeld (From holds nothing, several holds or shared
// ones). An empty Key, From or To, From equal to To, or a TTL <= 0 is refused with ErrInvalid.
type HandOffRequest struct {
	Key   string        // the lock's key, as the backend sees it (prefix included)
	From  string        // the owner that holds the key and gives it up
	To    string        // a fresh owner token that takes it: it must never have held the key
	TTL   time.Duration // the lease to set; backends round it up to whole milliseconds
	Fence bool          // draw a new fencing token for To (Acquisition.Token); default false
}

// Granter is implemented by a [KindLocker] whose releases can grant the key to the first waiter
// of its queue (AcquireRequest.Grant), so that a hand-off between Clients wakes only the next
// owner, who can start at once. All backends of this module but backend/quorum implement it.
type Granter interface {
	KindLocker
	// SubscribeAs is Subscribe for a waiter whose owner token is owner. notices receives ""
	// for a notice that grants nothing, and for the notice of a release that granted key to
	// owner, the ID of the request that last queued owner (AcquireRequest.ID): the grant came
	// after that request reached the backend, so its lease ends at least Grant after that
	// request was sent. The notice of a grant to another owner is not sent. Sends never block:
	// a notice pending absorbs one that grants nothing, and a grant replaces a notice pending.
	SubscribeAs(ctx context.Context, key, owner string) (notices <-chan string, cancel func(), err error)
}

// FenceRaiser is implemented by a Locker that can raise a key's fencing counter. A backend made
// of several Lockers (backend/quorum) uses it to keep its tokens increasing: after a new lock it
// raises the counter of every node that granted it to the token it reports. All backends of this
// module implement it.
type FenceRaiser interface {
	// RaiseFence sets the fencing counter of key to token if it is lower, so that the next new
	// lock of key with Fence gets a larger token. It never lowers the counter.
	RaiseFence(ctx context.Context, key string, token uint64) error
}

// Acquisition is what [Locker.Acquire] reports.
type Acquisition struct {
	// Holds is the owner's hold count after the call: 1 for a new lock, 2, 3… after re-entry,
	// and 0 when the lock was refused because another owner holds it. It counts the owner's
	// exclusive and shared holds together (see KindLocker).
	Holds int
	// TTL is, when the lock was refused, the holder's remaining lease (for readers, the longest
	// of theirs; for a semaphore's permits, the soonest to end: when a permit may be free); 0
	// when unknown.
	TTL time.Duration
	// Taken is, when a permit request (AcquireRequest.Limit) was refused, how many permits of the
	// semaphore are taken (its holders whose lease runs); 0 otherwise.
	Taken int
	// Token is the lock's fencing token when the request asked for one (Fence) and the lock was
	// granted, 0 otherwise. Tokens of a key strictly increase with every new lock on it (Holds
	// == 1) by any owner through any client that asks for them, a semaphore's new permits
	// included; a re-entry reports the token of the hold it re-enters. The counter behind them lives on the backend, next to the lock. The
	// Redis and PostgreSQL backends seed it from the server's clock (µs since 1970), so tokens keep
	// growing after the server lost its data, unless its clock went back; the memory backend
	// counts from 1.
	Token uint64
}

// Acquired reports whether the call obtained (or re-entered) the lock.
func (a Acquisition) Acquired() bool { return a.Holds > 0 }

// AcquireRequest is the argument of [Locker.Acquire].
type AcquireRequest struct {
	Key   string        // the lock's key, as the backend sees it (prefix included)
	Owner string        // the owner token
	TTL   time.Duration // the lease to set; backends round it up to whole milliseconds

	// ID, when not empty, names this call so that it takes effect at most once: a call with the
	// same ID within RequestWindow (a driver or the Client sending it again because the reply was
	// lost) changes nothing. It reports the first call's outcome while the hold that call added is
	// still there, and a refusal once that hold is gone or was taken back (see ReleaseRequest.Undo;
	// a single store reports TTL 0 then). IDs must be unique per key: the Client draws a random
	// 96-bit prefix per Client and adds a counter. Default "": no idempotence.
	ID string

	// Reentry says that the request may only re-enter a hold that Owner already has: when Owner
	// holds no lock on Key (it never did, or its hold expired or was forced away), Acquire
	// changes nothing, whoever else holds the key, and returns an error wrapping ErrNotHeld. The
	// Client sets it for every re-entry, so that the owner token of a lost hold never takes a
	// new lock. Default false: a missing hold is created.
	Reentry bool

	// Fresh says that Owner held nothing on Key before this request: a new random token, as the
	// Client makes for every Lock that is not a re-entry. A backend then recognises the request
	// sent again by the owner's hold alone and need not remember the ID (on Redis: no marker key
	// for a plain Lock). Default false: the backend remembers the ID for RequestWindow.
	Fresh bool

	// Fence asks for a fencing token in Acquisition.Token. On a Redis backend it costs one
	// counter key per lock key, kept for ever (no round trip). Default false.
	Fence bool

	// Shared asks for a shared (read) hold instead of an exclusive one; see [KindLocker] for what
	// it is granted with. Only a KindLocker honours it. Default false: exclusive.
	Shared bool

	// Limit, when positive, asks for a permit of the semaphore Key of Limit permits instead of a
	// lock: a shared hold of which at most Limit owners hold one at once (see [Semaphorer];
	// Shared is implied). Only a Semaphorer honours it. Default 0: a lock.
	Limit int

	// Fair makes the request respect the key's wait queue in full: it is granted only when no
	// live entry of the queue is ahead of Owner's (for a shared request: no entry but readers'),
	// where a plain request passes the entries of its own kind. Any granted request takes Owner's
	// entry out of the queue. Only a KindLocker honours it. Default false.
	Fair bool

	// Wait, when positive, says that the caller will wait and send this request again within
	// Wait if it is refused: a refused request then puts Owner in the key's wait queue (or keeps
	// its place there) for Wait from now, whatever its kind, so that requests of the other kind
	// that come after it wait behind it (see KindLocker: neither readers nor writers starve).
	// Only a KindLocker honours it. Default 0: the request never queues.
	Wait time.Duration

	// Grant, when positive, makes the queue entry that a refused exclusive request with Fresh
	// and Wait leaves ask for a grant: a release (or Dequeue) that frees the key while the entry
	// is at the head of the queue gives Owner one exclusive hold with a lease of Grant (with
	// Fence, a new fencing token), and its notice wakes only Owner's subscription, with ID
	// (Granter.SubscribeAs); a permit request's (Limit) entry asks likewise for a permit of
	// Limit, given by a release that ends one of the key's semaphore of Limit, or frees the key.
	// The hold is Owner's as if the request had been granted: Renew, Release or its next Acquire
	// (Fresh: it finds itself holding the key, its lease reset to TTL) work on it. Owner gives it
	// back with Dequeue; untaken, it ends with its lease. It is ignored without Fresh and Wait,
	// and for a shared request that is no permit's. Only a Granter honours it. Default 0: none.
	Grant time.Duration
}

// ReleaseRequest is the argument of [Locker.Release].
type ReleaseRequest struct {
	Key   string // the lock's key, as the backend sees it (prefix included)
	Owner string // the owner token

	// ID, when not empty, names this call so that it takes effect at most once, as
	// AcquireRequest.ID does: a release sent again (its reply was lost) never removes a second
	// hold, and reports the first call's remaining count (with Fresh, when that count was 0:
	// within ReplyWindow, then an error wrapping ErrNotHeld). Default "".
	ID string

	// Undo, when set, makes this a take-back: ID is then the ID of an earlier Acquire of Owner
	// on Key whose outcome the caller does not know (its ctx ended, or the call failed), and the
	// call removes the hold that Acquire added (with Fresh: every hold of Owner, which can only
	// come from that Acquire), if it took effect and was not taken back already; otherwise it
	// returns an error wrapping ErrNotHeld. When that Acquire has not reached the backend yet,
	// the backend remembers the take-back for RequestWindow, and the Acquire, arriving later, is
	// refused. Default false.
	Undo bool

	// Fresh says that Owner is a fresh owner (AcquireRequest.Fresh): it held nothing on Key
	// before the Acquire that gave it its first hold, and never takes a new lock once its holds
	// are gone. With Undo, it is the Fresh of the Acquire taken back. Without Undo, a release
	// that removes Owner's last hold need not remember its ID beyond ReplyWindow (0: not at all;
	// on Redis: no marker key): sent again later, it finds nothing, changes nothing and returns
	// an error wrapping ErrNotHeld. A release that leaves Owner holds is remembered as any
	// other. The Client sets it on take-backs, on giving back a hold it will not hand out, and,
	// with ReplyWindow, on the release of an Unlock of a plain Lock's lease (a driver may send it
	// again unseen; without a marker the Unlock could not tell that ErrNotHeld from a hold
	// forced away). Default false.
	Fresh bool

	// ReplyWindow, with Fresh and an ID and without Undo, is how long the backend remembers the
	// ID of a release that removes Owner's last hold: a copy sent again within it reports the
	// first outcome (0), a later one finds Owner holding nothing and returns an error wrapping
	// ErrNotHeld (it changes nothing either way). It bounds how long anyone can still read the
	// reply: the Client sets it to the time left until its Unlock's deadline (WithUnlockTimeout,
	// at most RequestWindow), measured before sending, so that the marker outlives the call. A
	// release that leaves Owner holds, a take-back, and a release without Fresh are remembered
	// for RequestWindow whatever it says. Backends round it up to whole milliseconds. Default 0:
	// such a release is not remembered at all (Fresh alone).
	ReplyWindow time.Duration

	// Shared says that the hold to release is a shared one (AcquireRequest.Shared), or a
	// semaphore's permit: an owner holding a key exclusively may also have shared holds on it.
	// Default false.
	Shared bool
}

// RequestWindow is how long a backend remembers a request ID (AcquireRequest.ID,
// ReleaseRequest.ID): a call sent again later than this after the first may take effect twice.
// The Client retries a call with the same ID only within half of it. On Redis, a re-entry, a
// release that leaves its owner holds, and a take-back each leave a small marker key (about 100
// bytes, at most 200 whatever the key's length) that lives this long. The Unlock of a plain Lock
// leaves one that lives only until that Unlock's deadline (at most WithUnlockTimeout, default
// 5 s: see ReleaseRequest.ReplyWindow); a plain Lock leaves none, nor does a local hand-off
// (HandOffer).
const RequestWindow = 20 * time.Second

// Renewal is one entry of a [Locker.Renew] batch: reset the lease of Key to TTL if Owner still
// holds it.
type Renewal struct {
	Key   string        // the lock's key, as the backend sees it (prefix included)
	Owner string        // the owner whose holds are renewed
	TTL   time.Duration // the new lease
}

// State describes a lock as [Client.Inspect] and [Locker.Inspect] report it. The zero State is a
// free key.
type State struct {
	// Locked reports whether any owner holds the key.
	Locked bool
	// Owner is the holder's owner token ("" when free). Locker.Inspect reports it whole;
	// Client.Inspect, for people, shows only its label and the first 8 characters of its
	// random part ("web-1/4242#9f86d081…": see WithOwnerLabel), since whoever knows the whole
	// token can release the lock. An owner set with WithOwner is shown whole.
	Owner string
	// Holds is the current owner's hold count (0 when free).
	Holds int
	// TTL is the remaining lease (0 when free): in shared mode, the longest of the readers'
	// own leases, which end one by one.
	TTL time.Duration
	// Shared reports a lock held in shared mode (by readers: Client.RLock). Owner is then one of
	// the readers, Holds the number of shared holds of all readers together. Default false:
	// exclusive, or free.
	Shared bool
	// Readers is the number of owners that hold the key in shared mode (0 when it is not).
	Readers int
	// Queued is the number of live entries of the key's wait queue: fair waiters, and writers
	// waiting for readers to leave (see AcquireRequest.Wait).
	Queued int
	// Limit is, for a semaphore (Client.Acquire), its number of permits; 0 for a lock or a free
	// key. A semaphore's Owner is then one of its holders, Holds their holds together, TTL the
	// longest of their leases; Shared is false and Readers 0.
	Limit int
	// Holders lists every owner that holds the key, sorted by owner token: the exclusive
	// holder, every reader, or every permit's holder (len(Holders) permits are taken). Nil when
	// the key is free. Client.Inspect shortens the tokens as it does Owner.
	Holders []Holder
}

// Holder is one owner's hold on a key, as Inspect reports it (State.Holders).
type Holder struct {
	Owner string        // the owner token (Client.Inspect: shortened, as State.Owner)
	Holds int           // its holds, of every kind
	TTL   time.Duration // the remaining lease of its own; > 0
}

// The sentinel errors. Errors returned by this module wrap them with context, one clause per
// layer, naming the package and the key once ("locker: unlock "k": goredis: release: lock not
// held"); test with [errors.Is], not the text.
var (
	// ErrNotObtained means the lock is held by another owner and the call gave up: TryLock's
	// one attempt was refused, Lock's retry strategy ran out, or Lock's ctx ended while waiting
	// (then the error also wraps ctx.Err()). The error is a *NotObtainedError. A backend that
	// could not be reached is never reported so: see ErrUnavailable.
	ErrNotObtained = errors.New("locker: lock not obtained")

	// ErrNotHeld means the caller does not hold the lock: the Lease was already unlocked, or
	// the backend no longer has the hold because it expired or was forced away. In the second
	// case mutual exclusion may have been violated while the caller thought it held the lock.
	ErrNotHeld = errors.New("locker: lock not held")

	// ErrLockLost is the cause of a lease context that ended because the hold was lost: the
	// watchdog found it gone, renewals failed until it may have expired, or a fixed lease ran
	// out. Read it with context.Cause(lease.Context()).
	ErrLockLost = errors.New("locker: lock lost")

	// ErrClosed is returned by calls on a closed Client, and is the cause of the lease contexts
	// that Close ended.
	ErrClosed = errors.New("locker: client closed")

	// ErrUnavailable means the backend could not be reached or could not answer for now
	// (connection refused or broken, a server loading its data or failing over). Lock retries
	// such failures, with the same request ID, for up to WithUnavailableTimeout (default 5s)
	// within its ctx and retry strategy, then returns an error that wraps it and the driver's
	// own error; TryLock returns it at once.
	ErrUnavailable = errors.New("locker: backend unavailable")

	// ErrInvalid means an argument or option was invalid (empty key, TTL under a millisecond,
	// nil context, nil backend…). Nothing was sent to the backend.
	ErrInvalid = errors.New("locker: invalid argument")

	// ErrNotALock means the key, or on Redis one of its companion keys (fencing counter,
	// request marker), holds something that is not this library's: another type of value, or a
	// hash without the lock's marker. Nothing was changed: the library never
	// writes to, renews or deletes such a key (ForceUnlock included).
	ErrNotALock = errors.New("locker: key is not a lock")

	// ErrLimitMismatch means that the key is held with another limit than the call's: a
	// semaphore of another size (Client.Acquire with another n), a lock where a permit was asked,
	// or a semaphore where a lock was. Nothing changed, and the call does not wait: every Client
	// of a key must agree on what it is (docs/semaphore.md says how to change n).
	ErrLimitMismatch = errors.New("locker: key is held with another limit")

	// ErrUpgrade means an exclusive Lock was asked by an owner that holds the key only shared
	// (through an RLock lease's context): the upgrade could wait for ever on another reader
	// doing the same, so it is refused at once and nothing changes. Unlock the shared lease and
	// Lock afresh instead.
	ErrUpgrade = errors.New("locker: cannot upgrade a shared hold to an exclusive one")
)

// NotObtainedError is the error of a Lock or TryLock that did not get the lock because another
// owner holds it. It wraps [ErrNotObtained] and, when Lock's ctx ended while waiting, ctx.Err().
type NotObtainedError struct {
	// Key is the key as the caller passed it (without the client's key prefix).
	Key string
	// TTL is the holder's remaining lease as last seen (for a semaphore: the soonest of its
	// permits' leases to end); 0 when unknown.
	TTL time.Duration
	// Limit is the semaphore's number of permits, for Acquire and TryAcquire; 0 for a lock.
	Limit int
	// Taken is, for a semaphore, how many of its permits were taken as last seen (it may be less
	// than Limit when fair waiters were ahead); 0 for a lock or when unknown.
	Taken int
	// Err is ctx.Err() when Lock's ctx ended while waiting, nil otherwise.
	Err error
}

// Error describes the refusal.
func (e *NotObtainedError) Error() string {
	var msg string
	switch {
	case e.Limit > 0 && e.TTL > 0:
		msg = fmt.Sprintf("locker: semaphore %s not obtained: %d of %d permits taken, the soonest ends in %v", display.Key(e.Key), e.Taken, e.Limit, e.TTL)
	case e.Limit > 0:
		msg = fmt.Sprintf("locker: semaphore %s not obtained: %d of %d permits taken", display.Key(e.Key), e.Taken, e.Limit)
	case e.TTL > 0:
		msg = fmt.Sprintf("locker: lock %s not obtained: held by another owner for %v more", display.Key(e.Key), e.TTL)
	default:
		msg = fmt.Sprintf("locker: lock %s not obtained", display.Key(e.Key))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrNotObtained and, when set, Err.
func (e *NotObtainedError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrNotObtained, e.Err}
	}
	return []error{ErrNotObtained}
}
