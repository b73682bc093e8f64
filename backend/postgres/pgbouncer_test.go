package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// The full suite through PgBouncer in transaction mode with 2 server connections, so that every
// statement may run on another server session than the one before: the backend keeps nothing in
// a session. pgx's statement cache cannot work there (PgBouncer 1.18 has no prepared statements),
// so the pool uses the exec mode; LISTEN cannot work there either, so the notices come over a
// connection straight to the database (WithNoticeConnConfig), as docs/postgres.md advises. The
// suite again, with a hop more: only with LOCKER_TEST_PGBOUNCER=1 (and pgbouncer installed).
func TestConformancePgBouncer(t *testing.T) {
	if os.Getenv("LOCKER_TEST_PGBOUNCER") != "1" {
		t.Skip("the whole suite through pgbouncer: set LOCKER_TEST_PGBOUNCER=1 (apt-get install pgbouncer)")
	}
	t.Parallel()
	srv := pgtest.Shared(t)
	bouncer := srv.PgBouncer(t, 2)
	schema := srv.Schema(t)
	opts := []postgres.Option{postgres.WithTable(schema, "locker")}
	if err := postgres.New(srv.Pool(t), opts...).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	direct, err := pgx.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	pool := poolAt(t, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&default_query_exec_mode=exec&pool_max_conns=8", bouncer))
	conformance.Run(t, conformance.Factory{
		New: func(t conformance.TB) locker.Locker {
			b := postgres.New(pool, append(opts, postgres.WithNoticeConnConfig(direct))...)
			t.Cleanup(b.Close)
			return b
		},
	})
}

// Exclusion, re-entry and shared holds through PgBouncer in transaction mode, on 2 server
// connections shared by 12 client connections, without notices (timers only): short enough to
// run wherever pgbouncer is installed.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	bouncer := srv.PgBouncer(t, 2)
	schema := srv.Schema(t)
	opts := []postgres.Option{postgres.WithTable(schema, "locker"), postgres.WithoutNotices()}
	if err := postgres.New(srv.Pool(t), opts...).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&default_query_exec_mode=exec&pool_max_conns=4", bouncer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var inside atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		c := locker.New(postgres.New(poolAt(t, url), opts...), locker.WithTTL(5*time.Second), locker.WithRetry(locker.LinearBackoff(5*time.Millisecond)))
		defer c.Close()
		for range 4 {
			wg.Go(func() {
				for range 5 {
					l, err := c.Lock(ctx, "bounced")
					if err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					inner, err := c.Lock(l.Context(), "bounced") // re-entry
					if err != nil || inner.Holds() != 2 {
						t.Errorf("re-entry: %v", err)
						return
					}
					inside.Add(-1)
					if err := inner.Unlock(); err != nil {
						t.Error(err)
					}
					if err := l.Unlock(); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	c := locker.New(postgres.New(poolAt(t, url), opts...))
	defer c.Close()
	r1, err := c.RLock(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.RLock(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Inspect(ctx, "shared"); err != nil || st.Readers != 2 {
		t.Fatalf("Inspect: %+v, %v; want 2 readers", st, err)
	}
	r1.Unlock()
	r2.Unlock()
}
