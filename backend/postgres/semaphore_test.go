package postgres_test

import (
	"context"
	_ "embed"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// previousSchema is schema.sql as it was before semaphores.
//
//go:embed testdata/schema_previous.sql
var previousSchema string

// Migrate upgrades a schema of the previous version in place: the holds taken through its
// functions stay, as locks (a writer's, two readers'), and so does a waiter's queue entry that
// asked for a grant, which the writer's release then grants the lock; the previous acquire,
// which knows no limit, is gone; semaphores work at once; and Migrate run again changes
// nothing.
func TestMigrateUpgradesInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Shared(t)
	pool := srv.Pool(t)
	schema := srv.Schema(t)
	if _, err := pool.Exec(ctx, postgres.Rename(schema, previousSchema)); err != nil {
		t.Fatalf("the previous schema: %v", err)
	}
	// $4 is the request's Wait and Grant, in milliseconds.
	oldAcquire := postgres.Rename(schema, "select r_holds from public.locker_acquire($1, $2, 60000, null, $3, $4, $4)")
	for _, h := range []struct {
		key, owner string
		flags      int32
		wait       int64
		holds      int
	}{{"old-lock", "w", 1, 0, 1}, {"old-read", "r1", 9, 0, 1}, {"old-read", "r2", 9, 0, 1}, {"old-lock", "waiter", 5, 60000, 0}} {
		var holds int
		if err := pool.QueryRow(ctx, oldAcquire, []byte(h.key), []byte(h.owner), h.flags, h.wait).Scan(&holds); err != nil || holds != h.holds {
			t.Fatalf("the previous acquire of %s by %s = %d, %v; want %d holds", h.key, h.owner, holds, err, h.holds)
		}
	}

	b := migratedOn(t, pool, schema)
	wantHolders := func(key string, shared bool, owners ...string) {
		t.Helper()
		st, err := b.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect(%s): %v", key, err)
		}
		var got []string
		for _, h := range st.Holders {
			if h.Holds != 1 || h.TTL <= 0 || h.TTL > time.Minute {
				t.Errorf("Inspect(%s): holder %+v, want 1 hold and a lease within a minute", key, h)
			}
			got = append(got, h.Owner)
		}
		if !st.Locked || st.Limit != 0 || st.Shared != shared || st.Owner != owners[0] || !reflect.DeepEqual(got, owners) {
			t.Fatalf("Inspect(%s) after Migrate = %+v, want held as a lock (shared %v) by %v", key, st, shared, owners)
		}
	}
	wantHolders("old-lock", false, "w")
	wantHolders("old-read", true, "r1", "r2")

	var pe *pgconn.PgError
	if _, err := pool.Exec(ctx, oldAcquire, []byte("old-lock"), []byte("x"), int32(1), int64(0)); !errors.As(err, &pe) || pe.Code != "42883" {
		t.Fatalf("the previous acquire after Migrate: %v, want undefined_function (42883): it would pass over semaphores", err)
	}
	permit := func(key, owner string) (locker.Acquisition, error) {
		return b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: owner, TTL: time.Minute, Limit: 2})
	}
	if _, err := permit("old-lock", "p"); !errors.Is(err, locker.ErrLimitMismatch) {
		t.Fatalf("a permit of the previous version's lock: %v, want ErrLimitMismatch", err)
	}
	for _, o := range []string{"p1", "p2"} {
		if a, err := permit("sem", o); err != nil || a.Holds != 1 {
			t.Fatalf("permit of %s: %+v, %v; want Holds 1", o, a, err)
		}
	}
	if a, err := permit("sem", "p3"); err != nil || a.Holds != 0 || a.Taken != 2 || a.TTL <= 0 {
		t.Fatalf("a third permit of 2: %+v, %v; want refused, Taken 2, a TTL", a, err)
	}

	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if st, err := b.Inspect(ctx, "sem"); err != nil || st.Limit != 2 || len(st.Holders) != 2 {
		t.Fatalf("the semaphore after Migrate again: %+v, %v; want its 2 permits", st, err)
	}
	wantHolders("old-lock", false, "w")
	if st, err := b.Inspect(ctx, "old-lock"); err != nil || st.Queued != 1 {
		t.Fatalf("Inspect(old-lock) after Migrate = %+v, %v; want the previous version's waiter queued", st, err)
	}
	if left, err := b.Release(ctx, locker.ReleaseRequest{Key: "old-lock", Owner: "w"}); err != nil || left != 0 {
		t.Fatalf("Release of the previous version's lock = %d, %v; want 0 left", left, err)
	}
	wantHolders("old-lock", false, "waiter") // granted the lock, with its grant's lease
	a, err := b.Acquire(ctx, locker.AcquireRequest{Key: "old-lock", Owner: "waiter", TTL: time.Minute, Fresh: true, Fence: true, Wait: time.Minute, Grant: time.Minute})
	if err != nil || a.Holds != 1 || a.Token == 0 {
		t.Fatalf("the waiter's Acquire after its grant = %+v, %v; want the lock granted, Holds 1, a fencing token", a, err)
	}
}

// A Limit outside [0, MaxLimit] is refused with ErrInvalid before any statement (the schema is
// not even there); MaxLimit itself is accepted.
func TestLimitBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Shared(t)
	pool := srv.Pool(t)
	bare := postgres.New(pool, postgres.WithTable(srv.Schema(t), "locker"), postgres.WithoutNotices())
	if bare.MaxLimit() != postgres.MaxLimit {
		t.Fatalf("MaxLimit() = %d, want %d", bare.MaxLimit(), postgres.MaxLimit)
	}
	for _, limit := range []int{-1, postgres.MaxLimit + 1} {
		_, err := bare.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, Limit: limit})
		if !errors.Is(err, locker.ErrInvalid) {
			t.Errorf("Acquire with Limit %d: %v, want ErrInvalid (and nothing sent)", limit, err)
		}
	}
	b := migratedOn(t, pool, srv.Schema(t))
	if a, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second, Limit: postgres.MaxLimit}); err != nil || a.Holds != 1 {
		t.Fatalf("Acquire with Limit MaxLimit = %+v, %v; want a permit", a, err)
	}
}

// statements records the SQL of every query a pool's connections send.
type statements struct {
	mu   sync.Mutex
	sent []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, data.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements recorded since the last take.
func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := s.sent
	s.sent = nil
	return sent
}

// A Client's plain Lock+Unlock is two statements, one call of the acquire function and one of
// the release function, as before semaphores; so is a permit's Acquire+Unlock.
func TestStatementsPerLockUnlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Shared(t)
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rec := &statements{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := srv.Schema(t)
	migratedOn(t, pool, schema)
	c := locker.New(postgres.New(pool, postgres.WithTable(schema, "locker"), postgres.WithoutNotices()))
	t.Cleanup(func() { _ = c.Close() })
	for _, obtain := range []struct {
		what string
		do   func() (*locker.Lease, error)
	}{
		{"Lock", func() (*locker.Lease, error) { return c.Lock(ctx, "k") }},
		{"Acquire", func() (*locker.Lease, error) { return c.Acquire(ctx, "s", 3) }},
	} {
		rec.take()
		l, err := obtain.do()
		if err != nil {
			t.Fatalf("%s: %v", obtain.what, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatalf("%s's Unlock: %v", obtain.what, err)
		}
		sent := rec.take()
		if len(sent) != 2 || !strings.Contains(sent[0], ".locker_acquire(") || !strings.Contains(sent[1], ".locker_release(") {
			t.Fatalf("%s+Unlock sent %q, want one acquire and one release", obtain.what, sent)
		}
	}
}
