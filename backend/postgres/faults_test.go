package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// Keys and owners of any bytes and any length are data, never SQL: NUL, quotes, a statement,
// invalid UTF-8, a megabyte.
func TestKeysOfAnyBytes(t *testing.T) {
	t.Parallel()
	pool, opts := migrated(t)
	b := postgres.New(pool, opts...)
	t.Cleanup(b.Close)
	ctx := context.Background()
	for _, key := range []string{"\x00", "'; drop table locker_holds; --", "\xff\xfe", "\\x00", strings.Repeat("k", 1<<20), "$1"} {
		owner := "o" + key[:min(len(key), 100)] // owners are at most 1024 bytes (the Client checks)
		a, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: owner, TTL: time.Minute, ID: "r" + owner})
		if err != nil || a.Holds != 1 {
			t.Fatalf("Acquire(%.20q) = %+v, %v", key, a, err)
		}
		if st, err := b.Inspect(ctx, key); err != nil || st.Owner != owner || st.Holds != 1 {
			t.Fatalf("Inspect(%.20q) = %+v, %v", key, st, err)
		}
		if st, err := b.Inspect(ctx, key+"x"); err != nil || st.Locked {
			t.Fatalf("Inspect of another key = %+v, %v", st, err)
		}
		if n, err := b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: owner}); err != nil || n != 0 {
			t.Fatalf("Release(%.20q) = %d, %v", key, n, err)
		}
	}
}

// Invalid options and arguments are refused with ErrInvalid, before anything is sent.
func TestInvalid(t *testing.T) {
	if postgres.SchemaSQL(postgres.WithTable("Public", "x")) != "" {
		t.Fatal("SchemaSQL with an invalid name is not empty")
	}
	sql := postgres.SchemaSQL(postgres.WithTable("app", "mylocks"))
	if strings.Contains(sql, "public.") || strings.Contains(sql, "locker_") || !strings.Contains(sql, "app.mylocks_acquire(") {
		t.Fatal("SchemaSQL(WithTable(app, mylocks)) still names the defaults")
	}
	ctx := context.Background()
	for _, b := range []*postgres.Backend{
		postgres.New(nil),
		postgres.New(nil, postgres.WithTable("a", "b;drop")),
		postgres.New(nil, postgres.WithNoticeLinger(-1)),
	} {
		if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}); !errors.Is(err, locker.ErrInvalid) {
			t.Fatalf("Acquire: %v, want ErrInvalid", err)
		}
		if err := b.Migrate(ctx); !errors.Is(err, locker.ErrInvalid) {
			t.Fatalf("Migrate: %v, want ErrInvalid", err)
		}
	}
	if err := postgres.New(nil).RaiseFence(ctx, "k", 1); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("RaiseFence: %v", err)
	}
}

// A database that is down is reported as down (ErrUnavailable) within seconds, never as
// contention; after a restart the lock works again, nothing of a hold that was committed is
// lost, and waiters' subscriptions listen again and are told.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	schema := srv.Schema(t)
	pool := srv.Pool(t, "pool_max_conns=4")
	b := migratedOn(t, pool, schema)
	ctx := context.Background()
	c := locker.New(b, locker.WithTTL(time.Minute), locker.WithUnavailableTimeout(time.Second))
	defer c.Close()
	held, err := c.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	notices, cancel, err := b.Subscribe(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	srv.Stop(t)
	start := time.Now()
	_, err = c.Lock(ctx, "other")
	if !errors.Is(err, locker.ErrUnavailable) || errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("Lock on a stopped server: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Lock on a stopped server took %v", d)
	}
	if _, err := b.Inspect(ctx, "held"); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Inspect on a stopped server: %v, want ErrUnavailable", err)
	}
	for len(notices) > 0 {
		<-notices
	}

	srv.Restart(t)
	select { // the subscription listens again, and says a notice may have been missed
	case <-notices:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice after the restart")
	}
	if st, err := c.Inspect(ctx, "held"); err != nil || !st.Locked {
		t.Fatalf("Inspect after the restart: %+v, %v; want the hold committed before it", st, err)
	}
	if _, err := c.TryLock(ctx, "held"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("TryLock of a held key after the restart: %v", err)
	}
	if err := held.Unlock(); err != nil {
		t.Fatalf("Unlock after the restart: %v", err)
	}
	select {
	case <-notices:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice of the release after the restart")
	}
	l, err := c.Lock(ctx, "other")
	if err != nil {
		t.Fatalf("Lock after the restart: %v", err)
	}
	l.Unlock()
}

// A statement cut by the server's statement_timeout is rolled back and reported as
// ErrUnavailable (the Client tries again), and a call cut by its ctx reports ctx's error, not
// unavailability.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.Schema(t)
	slow := srv.Pool(t, "pool_max_conns=2")
	b := migratedOn(t, slow, schema)
	ctx := context.Background()
	// Another transaction takes the key (its advisory lock, as every writer does) and waits.
	tx, err := slow.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "select "+schema+".locker_enter(sha256($1))", []byte("k")); err != nil {
		t.Fatal(err)
	}
	timed := srv.Pool(t, "pool_max_conns=1", "statement_timeout=200")
	bt := postgres.New(timed, postgres.WithTable(schema, "locker"))
	t.Cleanup(bt.Close)
	_, err = bt.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second})
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Acquire cut by statement_timeout: %v, want ErrUnavailable", err)
	}
	// The call cut by its ctx is another owner's: its outcome is unknown (pgx may close the
	// connection while the statement still waits on the server, which then goes on), so it may
	// hold the key once the transaction ends; "o" must not.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(cctx, locker.AcquireRequest{Key: "k", Owner: "p", TTL: time.Second})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Acquire cut by its ctx: %v, want DeadlineExceeded only", err)
	}
	tx.Rollback(ctx)
	if _, err := b.Release(ctx, locker.ReleaseRequest{Key: "k", Owner: "o"}); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Release of the owner whose Acquire statement_timeout cut: %v, want ErrNotHeld (nothing of it took effect)", err)
	}
}

// A pool whose transactions run above READ COMMITTED is refused, not served wrongly: the
// snapshot of such a call would be older than the advisory lock it waited for. The error is not
// ErrUnavailable (it will not pass) and nothing is written.
func TestIsolationAboveReadCommitted(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.Schema(t)
	opts := []postgres.Option{postgres.WithTable(schema, "locker")}
	plain := postgres.New(srv.Pool(t), opts...)
	t.Cleanup(plain.Close)
	ctx := context.Background()
	if err := plain.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, level := range []string{"repeatable%20read", "serializable"} {
		b := postgres.New(srv.Pool(t, "default_transaction_isolation="+level), opts...)
		t.Cleanup(b.Close)
		_, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second})
		if err == nil || errors.Is(err, locker.ErrUnavailable) || !strings.Contains(err.Error(), "READ COMMITTED") {
			t.Fatalf("Acquire at %s: %v, want a refusal naming READ COMMITTED", level, err)
		}
		if errs := b.Renew(ctx, []locker.Renewal{{Key: "k", Owner: "o", TTL: time.Second}}); errs[0] == nil || errors.Is(errs[0], locker.ErrNotHeld) {
			t.Fatalf("Renew at %s: %v, want a refusal", level, errs[0])
		}
	}
	if st, err := plain.Inspect(ctx, "k"); err != nil || st.Locked {
		t.Fatalf("Inspect: %+v, %v; want nothing written", st, err)
	}
}

// The SQLSTATEs of a database that will answer again, and only those, pass as unavailable.
func TestUnavailable(t *testing.T) {
	for code, want := range map[string]bool{
		"40001": true, "40P01": true, "57014": true, "57P01": true, "57P03": true, "08006": true, "25006": true, "53300": true,
		"42883": false, "42501": false, "0A000": false, "23505": false,
	} {
		if got := postgres.Unavailable(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("Unavailable(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
	if !postgres.Unavailable(fmt.Errorf("dial: %w", syscall.ECONNREFUSED)) || postgres.Unavailable(errors.New("other")) {
		t.Error("Unavailable of a refused connection, or of any error")
	}
}

// Ended holds, queue entries and request markers of keys that nobody touches again are deleted
// by the next new locks of other keys (up to 16 of each table, every 8th new lock), so no
// sweeper is needed.
func TestEndedRowsSwept(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.Schema(t)
	pool := srv.Pool(t)
	b := migratedOn(t, pool, schema)
	ctx := context.Background()
	for i := range 12 {
		key := fmt.Sprint("gone:", i)
		for _, req := range []locker.AcquireRequest{
			{Key: key, Owner: "o", TTL: time.Millisecond, Fresh: true},              // a hold that ends
			{Key: key + ":w", Owner: "x", TTL: time.Minute, Fresh: true},            // a hold that stays
			{Key: key + ":w", Owner: "p", TTL: time.Minute, Wait: time.Millisecond}, // a queue entry that ends
			{Key: key + ":r", Owner: "q", TTL: time.Minute, Fresh: true},
		} {
			if _, err := b.Acquire(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		// A marker that ends: a fresh owner's last release, remembered for its reply window.
		if _, err := b.Release(ctx, locker.ReleaseRequest{Key: key + ":r", Owner: "q", ID: "r", Fresh: true, ReplyWindow: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	count := func(table string) (n int) {
		if err := pool.QueryRow(ctx, "select count(*) from "+schema+".locker_"+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if h, q, r := count("holds"), count("queue"), count("requests"); h+q+r <= 12 {
		t.Fatalf("before: %d holds, %d queue entries, %d markers; want ended ones beside the 12 holds that stay", h, q, r)
	}
	for i := range 8 { // one of them sweeps
		if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: fmt.Sprint("new:", i), Owner: "o", TTL: time.Minute, Fresh: true}); err != nil {
			t.Fatal(err)
		}
	}
	if h, q, r := count("holds"), count("queue"), count("requests"); h != 20 || q != 0 || r != 0 {
		t.Fatalf("after 8 new locks: %d holds, %d queue entries, %d markers; want the 20 live holds alone", h, q, r)
	}
}
