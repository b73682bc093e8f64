package locker_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/notify"
)

// grantNotices is a memory backend whose grant notices the test sends: it plays the pub/sub of
// SubscribeAs. It records the request IDs of every owner's Acquire calls.
type grantNotices struct {
	*memory.Backend
	mu      sync.Mutex
	ids     map[string][]string // owner → the IDs of its Acquire calls, in order
	waiters map[*notify.Waiter]struct{}
}

func newGrantNotices() *grantNotices {
	return &grantNotices{Backend: memory.New(), ids: make(map[string][]string), waiters: make(map[*notify.Waiter]struct{})}
}

func (b *grantNotices) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	b.mu.Lock()
	b.ids[req.Owner] = append(b.ids[req.Owner], req.ID)
	b.mu.Unlock()
	return b.Backend.Acquire(ctx, req)
}

func (b *grantNotices) SubscribeAs(_ context.Context, _, owner string) (<-chan string, func(), error) {
	w := notify.NewOwner(owner)
	b.mu.Lock()
	b.waiters[w] = struct{}{}
	b.mu.Unlock()
	return w.Granted, func() {
		b.mu.Lock()
		delete(b.waiters, w)
		b.mu.Unlock()
	}, nil
}

// notify sends the subscribers the notice of a grant to grantee with request ID id, as the
// release that made it would.
func (b *grantNotices) notify(grantee, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.waiters {
		w.Notify(grantee, id)
	}
}

// other returns the owner of Acquire calls that is not holder, and the IDs of its calls.
func (b *grantNotices) other(t *testing.T, holder string) (string, []string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for owner, ids := range b.ids {
		if owner != holder {
			return owner, append([]string(nil), ids...)
		}
	}
	t.Fatal("no Acquire of the waiter")
	return "", nil
}

// A Lock that waits for a grant takes one on its notice only when the grant is to its owner's
// latest request: the grant of an earlier one may have lapsed, and the key gone to someone else
// since. The notice of a grant to an earlier request of its owner makes it ask the backend
// again; that of a grant to another owner does not even wake it; neither returns a Lease while
// another holds the key. The notice of the grant its holder's Unlock made is taken at once.
func TestGrantOfAnEarlierRequestRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := newGrantNotices()
		holder, waiter := locker.New(b, locker.WithTTL(6*time.Second)), locker.New(b, locker.WithTTL(6*time.Second))
		defer holder.Close()
		defer waiter.Close()
		held, err := holder.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		got := lockInBackground(t, waiter, "k")
		synctest.Wait() // refused before and after subscribing; it waits on its notices
		owner, ids := b.other(t, held.Owner())
		if len(ids) < 2 {
			t.Fatalf("the waiter made %d Acquire calls before it waited, want at least 2 (before and after subscribing)", len(ids))
		}
		for _, notice := range []struct {
			what, grantee, id string
			wakes             bool
		}{
			{"a grant to another owner", "another-owner", ids[len(ids)-1], false},
			{"a grant to an earlier request of its owner", owner, ids[0], true},
		} {
			_, before := b.other(t, held.Owner())
			b.notify(notice.grantee, notice.id)
			synctest.Wait()
			select {
			case l := <-got:
				t.Fatalf("on the notice of %s, the waiter's Lock returned %s while the holder still holds the key", notice.what, l)
			default:
			}
			_, after := b.other(t, held.Owner())
			if asked := len(after) > len(before); asked != notice.wakes {
				t.Fatalf("on the notice of %s, the waiter asked the backend again: %v, want %v", notice.what, asked, notice.wakes)
			}
		}
		if st, _ := b.Inspect(ctx, "k"); st.Owner != held.Owner() {
			t.Fatalf("after the notices: %+v, want the holder's", st)
		}

		// The grant the holder's Unlock makes is to the waiter's latest request: taken at once.
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
		if st, _ := b.Inspect(ctx, "k"); st.Owner != owner {
			t.Fatalf("after the holder's Unlock: %+v, want the key granted to the waiter", st)
		}
		_, ids = b.other(t, held.Owner())
		b.notify(owner, ids[len(ids)-1])
		synctest.Wait()
		select {
		case l := <-got:
			if l == nil {
				t.FailNow()
			}
			if _, after := b.other(t, held.Owner()); len(after) != len(ids) {
				t.Fatalf("the waiter made %d Acquire calls to take its grant, want none", len(after)-len(ids))
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the waiter's Lock did not return on the notice of the grant to its latest request")
		}
	})
}
