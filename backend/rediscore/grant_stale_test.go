package rediscore_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// acquireIDs is a Backend that records the request IDs of every owner's Acquire calls.
type acquireIDs struct {
	*rediscore.Backend
	mu  sync.Mutex
	ids map[string][]string // owner → the IDs of its Acquire calls, in order
}

func (b *acquireIDs) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	b.mu.Lock()
	b.ids[req.Owner] = append(b.ids[req.Owner], req.ID)
	b.mu.Unlock()
	return b.Backend.Acquire(ctx, req)
}

// other returns the owner of Acquire calls that is not holder, and the IDs of its calls.
func (b *acquireIDs) other(t *testing.T, holder string) (string, []string) {
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
// latest request (the root package's test of the same name, here through the notices' wire
// format and the hub): on the channel of the key, the notice of a grant to an earlier request
// of the waiter's owner makes it ask again, that of a grant to another owner does not wake it,
// and neither returns a Lease while another holds the key; the notice release.lua sends when the
// holder's Unlock grants the key to the waiter is taken without a call.
func TestGrantOfAnEarlierRequestRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := redistest.Miniredis(t)
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0", Dialer: func(context.Context, string, string) (net.Conn, error) { return m.Dial() }})
		defer rdb.Close()
		b := &acquireIDs{Backend: goredis.New(rdb, rediscore.WithNoticeLinger(0)), ids: make(map[string][]string)}
		holder, waiter := locker.New(b, locker.WithTTL(6*time.Second)), locker.New(b, locker.WithTTL(6*time.Second))
		defer holder.Close()
		defer waiter.Close()
		const key = "k"
		held, err := holder.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *locker.Lease, 1)
		go func() {
			l, err := waiter.Lock(ctx, key)
			if err != nil {
				t.Errorf("Lock: %v", err)
			}
			got <- l
		}()
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
			// As release.lua (lib.lua: free) words it: "<lock>\n<length of the ID>:<ID><owner>".
			if n := m.Publish(rediscore.Channel(key), fmt.Sprintf("%s\n%d:%s%s", key, len(notice.id), notice.id, notice.grantee)); n != 1 {
				t.Fatalf("the notice of %s reached %d subscribers, want the waiter's", notice.what, n)
			}
			synctest.Wait()
			select {
			case l := <-got:
				t.Fatalf("on the notice of %s, the waiter's Lock returned %s while the holder still holds the key", notice.what, l)
			default:
			}
			_, after := b.other(t, held.Owner())
			if asked := len(after) > len(before); asked != notice.wakes {
				t.Fatalf("on the notice of %s, the waiter asked the server again: %v, want %v", notice.what, asked, notice.wakes)
			}
		}
		if st, _ := b.Inspect(ctx, key); st.Owner != held.Owner() {
			t.Fatalf("after the notices: %+v, want the holder's", st)
		}

		_, ids = b.other(t, held.Owner())
		if err := held.Unlock(); err != nil { // grants the key to the waiter's latest request
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case l := <-got:
			if l == nil {
				t.FailNow()
			}
			if l.Owner() != owner {
				t.Fatalf("the waiter's Lease is %s's, want %s's", l.Owner(), owner)
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
