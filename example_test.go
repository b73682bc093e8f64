package locker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// Lock a key, work under the lease's context, unlock, and check Unlock's error: ErrNotHeld
// means the lock was lost while the work ran, so another owner may have worked at the same time.
func Example() {
	client := locker.New(memory.New(), locker.WithTTL(10*time.Second))
	defer client.Close()

	settle := func(ctx context.Context, invoice string) (err error) {
		lease, err := client.Lock(ctx, invoice)
		if err != nil {
			return err
		}
		defer func() {
			if uerr := lease.Unlock(); uerr != nil && err == nil {
				err = uerr // the work's result is in doubt: the lock was lost during it
			}
		}()
		// Work under lease.Context(): it ends if the lock is lost.
		fmt.Println("locked", lease.Key(), "holds:", lease.Holds())
		return lease.Context().Err()
	}
	if err := settle(context.Background(), "invoice:42"); err != nil {
		fmt.Println("settle:", err)
	}
	// Output: locked invoice:42 holds: 1
}

// Lock's ctx bounds the wait only: the lease's context does not end with it. To stop the work
// also when a request's ctx ends (its client went away), derive a context from the lease's and
// cancel it with context.AfterFunc.
func ExampleLease_Context_request() {
	client := locker.New(memory.New())
	defer client.Close()
	request, cancelRequest := context.WithCancel(context.Background()) // say, an HTTP request's
	defer cancelRequest()

	lease, err := client.Lock(request, "invoice:42")
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	defer lease.Unlock()
	work, stop := context.WithCancel(lease.Context())
	defer stop()
	defer context.AfterFunc(request, stop)()

	cancelRequest() // the request ends while the work runs
	<-work.Done()
	fmt.Println("work stopped; lease still held:", lease.Context().Err() == nil)
	// Output: work stopped; lease still held: true
}

// An owner label tells an operator who holds a lock: Inspect shows it with a short prefix of
// the owner's random part (the whole token stays secret).
func ExampleWithOwnerLabel() {
	client := locker.New(memory.New(), locker.WithOwnerLabel("worker-1/4242"))
	defer client.Close()
	ctx := context.Background()

	lease, _ := client.Lock(ctx, "nightly-job")
	defer lease.Unlock()
	st, _ := client.Inspect(ctx, "nightly-job")
	label, random, _ := strings.Cut(st.Owner, "#")
	fmt.Println(label, len(random) < len(lease.Owner()))
	// Output: worker-1/4242 true
}

// Another process can re-enter a hold it was handed (Lease.Owner): it adds a hold and never
// takes a new lock, so once the hold is gone it fails with ErrLockLost.
func ExampleWithHeldOwner() {
	ctx := context.Background()
	backend := memory.New()
	parent, child := locker.New(backend), locker.New(backend) // two processes, in effect
	defer parent.Close()
	defer child.Close()

	outer, _ := parent.Lock(ctx, "deploy")
	inner, err := child.Lock(ctx, "deploy", locker.WithHeldOwner(outer.Owner()))
	fmt.Println(inner.Holds(), err)
	inner.Unlock() // releases the child's hold only
	outer.Unlock()

	_, err = child.Lock(ctx, "deploy", locker.WithHeldOwner(outer.Owner()))
	fmt.Println(errors.Is(err, locker.ErrLockLost))
	// Output:
	// 2 <nil>
	// true
}

// A function that locks can call another that locks the same key: the lease's context carries
// the ownership, so the inner Lock re-enters instead of waiting for itself.
func ExampleClient_Lock_reentry() {
	client := locker.New(memory.New())
	defer client.Close()

	var settle func(ctx context.Context, depth int)
	settle = func(ctx context.Context, depth int) {
		lease, err := client.Lock(ctx, "account:7")
		if err != nil {
			fmt.Println("lock:", err)
			return
		}
		defer lease.Unlock()
		fmt.Println("depth", depth, "holds", lease.Holds())
		if depth < 3 {
			settle(lease.Context(), depth+1)
		}
	}
	settle(context.Background(), 1)

	st, _ := client.Inspect(context.Background(), "account:7")
	fmt.Println("locked after all unlocks:", st.Locked)
	// Output:
	// depth 1 holds 1
	// depth 2 holds 2
	// depth 3 holds 3
	// locked after all unlocks: false
}

// TryLock does not wait: a refusal wraps ErrNotObtained and tells how long the holder's lease
// has left.
func ExampleClient_TryLock() {
	client := locker.New(memory.New(), locker.WithTTL(5*time.Second))
	defer client.Close()
	ctx := context.Background()

	held, _ := client.Lock(ctx, "report")
	defer held.Unlock()

	_, err := client.TryLock(ctx, "report") // a different owner: ctx carries no ownership
	var refused *locker.NotObtainedError
	if errors.As(err, &refused) {
		fmt.Println(errors.Is(err, locker.ErrNotObtained), refused.TTL <= 5*time.Second)
	}
	// Output: true true
}

// Lock waits for the holder; bound the wait with the ctx. The waiter is woken by the release
// notice as soon as the holder unlocks.
func ExampleClient_Lock_wait() {
	client := locker.New(memory.New())
	defer client.Close()

	holder, _ := client.Lock(context.Background(), "nightly-job")
	go func() {
		time.Sleep(50 * time.Millisecond)
		holder.Unlock()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	waiter, err := client.Lock(ctx, "nightly-job")
	if err != nil {
		fmt.Println("gave up:", err)
		return
	}
	defer waiter.Unlock()
	fmt.Println("got it after the holder unlocked")
	// Output: got it after the holder unlocked
}

// A lost lease ends the lease's context with cause ErrLockLost, so work under it can stop.
func ExampleLease_Context() {
	client := locker.New(memory.New())
	defer client.Close()
	ctx := context.Background()

	lease, _ := client.Lock(ctx, "migration")
	client.ForceUnlock(ctx, "migration") // an operator removes the lock

	<-lease.Context().Done()
	fmt.Println(context.Cause(lease.Context()))
	fmt.Println(errors.Is(lease.Unlock(), locker.ErrNotHeld))
	// Output:
	// locker: lock lost
	// true
}

// Fencing tokens let the storage a lock protects refuse a holder that lost the lock without
// noticing (a process paused for longer than the TTL): each write carries the lease's token, and
// the storage keeps the highest token it has seen.
func ExampleWithFencing() {
	client := locker.New(memory.New(), locker.WithFencing())
	defer client.Close()
	ctx := context.Background()

	var highest uint64 // what the storage remembers
	write := func(token uint64, what string) {
		if token < highest {
			fmt.Println("refused:", what, "with token", token)
			return
		}
		highest = token
		fmt.Println("written:", what, "with token", token)
	}

	first, _ := client.Lock(ctx, "report")
	stale := first.Token()
	first.Unlock() // or: its lease ran out while its process was paused

	second, _ := client.Lock(ctx, "report")
	write(second.Token(), "the second holder's write")
	second.Unlock()
	write(stale, "the first holder's late write")
	// Output:
	// written: the second holder's write with token 2
	// refused: the first holder's late write with token 1
}

// Readers share a key: RLock holds while other readers hold too, and a writer waits until every
// reader has unlocked (TryLock, which does not wait, is refused meanwhile).
func ExampleClient_RLock() {
	backend := memory.New()
	readers, writers := locker.New(backend), locker.New(backend)
	defer readers.Close()
	defer writers.Close()
	ctx := context.Background()

	a, _ := readers.RLock(ctx, "catalog")
	b, _ := readers.RLock(ctx, "catalog") // another reader: a fresh owner, not a re-entry
	st, _ := readers.Inspect(ctx, "catalog")
	fmt.Println("shared:", st.Shared, "readers:", st.Readers)

	_, err := writers.TryLock(ctx, "catalog")
	fmt.Println("writer while reading:", errors.Is(err, locker.ErrNotObtained))

	a.Unlock()
	b.Unlock()
	w, err := writers.TryLock(ctx, "catalog")
	fmt.Println("writer after the readers:", err == nil)
	w.Unlock()
	// Output:
	// shared: true readers: 2
	// writer while reading: true
	// writer after the readers: true
}

// A semaphore of 2: two permits held at once, from any Clients; a third waits, or, with
// TryAcquire, is refused and told how many are taken; Unlock gives a permit back.
func ExampleClient_Acquire() {
	backend := memory.New()
	web, batch := locker.New(backend), locker.New(backend)
	defer web.Close()
	defer batch.Close()
	ctx := context.Background()

	first, _ := web.Acquire(ctx, "jobs:render", 2)
	second, _ := batch.Acquire(ctx, "jobs:render", 2)
	st, _ := web.Inspect(ctx, "jobs:render")
	fmt.Println("limit:", st.Limit, "taken:", len(st.Holders))

	_, err := batch.TryAcquire(ctx, "jobs:render", 2)
	var refused *locker.NotObtainedError
	fmt.Println("third refused:", errors.As(err, &refused), "taken:", refused.Taken, "of", refused.Limit)

	_, err = batch.TryAcquire(ctx, "jobs:render", 3) // another n while the key is held
	fmt.Println("another n:", errors.Is(err, locker.ErrLimitMismatch))

	first.Unlock()
	third, err := batch.TryAcquire(ctx, "jobs:render", 2)
	fmt.Println("after an Unlock:", err == nil)
	second.Unlock()
	third.Unlock()
	// Output:
	// limit: 2 taken: 2
	// third refused: true taken: 2 of 2
	// another n: true
	// after an Unlock: true
}

// Inspect tells whether a key is held, by whom (the owner's label and the start of its token:
// never the whole token), how many holds, and the lease left; it changes nothing.
func ExampleClient_Inspect() {
	client := locker.New(memory.New(), locker.WithOwnerLabel("billing-1"), locker.WithTTL(30*time.Second))
	defer client.Close()
	ctx := context.Background()

	lease, _ := client.Lock(ctx, "invoice:42")
	defer lease.Unlock()
	st, err := client.Inspect(ctx, "invoice:42")
	if err != nil {
		fmt.Println("inspect:", err)
		return
	}
	fmt.Println("locked:", st.Locked, "holds:", st.Holds, "by billing-1:", strings.HasPrefix(st.Owner, "billing-1#"))
	fmt.Println("lease left ≤ 30s:", st.TTL > 0 && st.TTL <= 30*time.Second)

	free, _ := client.Inspect(ctx, "invoice:43")
	fmt.Println("free key:", !free.Locked)
	// Output:
	// locked: true holds: 1 by billing-1: true
	// lease left ≤ 30s: true
	// free key: true
}

// ForceUnlock deletes a lock whoever holds it (an operator's tool, for a holder that is stuck):
// the holder's lease context ends with ErrLockLost, its Unlock reports ErrNotHeld, and waiters
// are woken.
func ExampleClient_ForceUnlock() {
	backend := memory.New()
	holder := locker.New(backend, locker.WithTTL(300*time.Millisecond)) // renewed every 100ms
	operator := locker.New(backend)
	defer holder.Close()
	defer operator.Close()
	ctx := context.Background()

	lease, _ := holder.Lock(ctx, "nightly-report")
	removed, err := operator.ForceUnlock(ctx, "nightly-report")
	fmt.Println("removed:", removed, err)

	<-lease.Context().Done() // the holder's watchdog finds the hold gone at its next renewal
	fmt.Println("holder's lease:", context.Cause(lease.Context()) == locker.ErrLockLost)
	fmt.Println("holder's Unlock:", errors.Is(lease.Unlock(), locker.ErrNotHeld))
	// Output:
	// removed: true <nil>
	// holder's lease: true
	// holder's Unlock: true
}
