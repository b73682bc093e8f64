package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
)

// However many keys are waited on, a Backend listens on one connection, outside its pool (a pool
// of one connection still serves the lock's calls); a release of any of them is noticed; and the
// connection closes after the last subscription and the linger.
func TestNoticeConnectionBounded(t *testing.T) {
	t.Parallel()
	pool, opts := migrated(t)
	one := poolAt(t, pool.Config().ConnString()+"&pool_max_conns=1")
	b := postgres.New(one, append(opts, postgres.WithNoticeLinger(0))...)
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listening := func() int {
		var n int
		if err := pool.QueryRow(ctx, "select count(*) from pg_stat_activity where query ilike 'listen %' and state = 'idle'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const keys = 500
	var notices []<-chan struct{}
	var cancels []func()
	for i := range keys {
		ch, stop, err := b.Subscribe(ctx, fmt.Sprint("many:", i))
		if err != nil {
			t.Fatal(err)
		}
		notices, cancels = append(notices, ch), append(cancels, stop)
	}
	if n := listening(); n != 1 {
		t.Fatalf("%d listening connections for %d keys, want 1", n, keys)
	}
	for _, i := range []int{0, keys / 2, keys - 1} {
		key := fmt.Sprint("many:", i)
		if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err) // through the pool's one connection, the listener's being its own
		}
		if _, err := b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-notices[i]:
		case <-ctx.Done():
			t.Fatalf("no notice of the release of %s", key)
		}
	}
	for _, stop := range cancels {
		stop()
	}
	for deadline := time.Now().Add(10 * time.Second); listening() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the notice connection still listens after the last subscription ended")
		}
	}
}
