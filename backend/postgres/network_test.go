package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/faultproxy"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// faulty is a Backend whose connections go through a fault proxy, and one that does not, to
// see what the server has.
type faulty struct {
	proxy          *faultproxy.Proxy
	through, plain *postgres.Backend
}

func startFaulty(t *testing.T) faulty {
	t.Helper()
	srv := pgtest.Shared(t)
	schema := srv.Schema(t)
	proxy := faultproxy.Start(t, srv.Addr)
	opts := []postgres.Option{postgres.WithTable(schema, "locker")}
	plain := postgres.New(srv.Pool(t), opts...)
	t.Cleanup(plain.Close)
	if err := plain.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&pool_max_conns=4", proxy.Addr())
	through := postgres.New(poolAt(t, url), opts...)
	t.Cleanup(through.Close)
	return faulty{proxy, through, plain}
}

// holds is what the server has of key: its holder's hold count (0 when free).
func (f faulty) holds(t *testing.T, key string) int {
	t.Helper()
	st, err := f.plain.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return st.Holds
}

// A lost reply (the statement ran and committed, the client heard nothing) never leaves the
// server with a hold more or less than the Client believes: a Lock, a re-entry and an Unlock
// whose replies are lost are sent again with the same request ID and take effect once.
func TestReplyDropped(t *testing.T) {
	t.Parallel()
	f := startFaulty(t)
	c := locker.New(f.through, locker.WithTTL(10*time.Second))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 10 {
		key := fmt.Sprintf("drop:%d", i)
		dropped := f.proxy.Dropped()
		f.proxy.DropRepliesTo(key, 1)
		l, err := c.Lock(ctx, key)
		if err != nil || l.Holds() != 1 || f.holds(t, key) != 1 {
			t.Fatalf("Lock with its reply lost: %v, Holds %d; the server has %d", err, l.Holds(), f.holds(t, key))
		}
		f.proxy.DropRepliesTo(key, 1)
		inner, err := c.Lock(l.Context(), key)
		if err != nil || inner.Holds() != 2 || f.holds(t, key) != 2 {
			t.Fatalf("re-entry with its reply lost: %v; the server has %d", err, f.holds(t, key))
		}
		f.proxy.DropRepliesTo(key, 1)
		if err := inner.Unlock(); err != nil || f.holds(t, key) != 1 {
			t.Fatalf("Unlock with its reply lost: %v; the server has %d, want 1", err, f.holds(t, key))
		}
		if _, err := locker.New(f.plain).TryLock(ctx, key); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("another owner's TryLock under the outer lease: %v", err)
		}
		f.proxy.DropRepliesTo(key, 1)
		if err := l.Unlock(); err != nil || f.holds(t, key) != 0 {
			t.Fatalf("last Unlock with its reply lost: %v; the server has %d", err, f.holds(t, key))
		}
		if f.proxy.Dropped()-dropped != 4 {
			t.Fatalf("%d replies dropped, want 4", f.proxy.Dropped()-dropped)
		}
	}
}

// A network that swallows everything (a partition) ends the lease's context, with ErrLockLost,
// before the lease can have run out on the server; and a Lock under way returns when its ctx
// ends.
func TestBlackhole(t *testing.T) {
	t.Parallel()
	f := startFaulty(t)
	const ttl = 2 * time.Second
	c := locker.New(f.through, locker.WithTTL(ttl), locker.WithUnlockTimeout(time.Second))
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "partitioned")
	if err != nil {
		t.Fatal(err)
	}
	f.proxy.Blackhole()
	select {
	case <-l.Context().Done():
	case <-time.After(2 * ttl):
		t.Fatal("the lease's context did not end")
	}
	if st, err := f.plain.Inspect(ctx, "partitioned"); err != nil || !st.Locked {
		t.Fatalf("when the lease's context ended the server had %+v, %v: it ended after the lease", st, err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Lock(short, "other"); err == nil {
		t.Fatal("Lock through a black hole succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Lock with a 300ms ctx through a black hole took %v", d)
	}
	f.proxy.Heal()
	f.proxy.Reset() // the calls the black hole swallowed end now, not at their deadlines
}
