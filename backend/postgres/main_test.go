package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/pgtest"
)

// One server for the package's tests; each test works in a schema of its own.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// migrated returns a pool on the shared server and the options of a fresh, migrated schema.
func migrated(t testing.TB) (*pgxpool.Pool, []postgres.Option) {
	t.Helper()
	srv := pgtest.Shared(t)
	pool := srv.Pool(t)
	opts := []postgres.Option{postgres.WithTable(srv.Schema(t), "locker")}
	b := postgres.New(pool, opts...)
	if err := b.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool, opts
}

// poolAt returns a pool on url, closed in t.Cleanup.
func poolAt(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
