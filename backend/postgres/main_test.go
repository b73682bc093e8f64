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
	schema := srv.Schema(t)
	migratedOn(t, pool, schema)
	return pool, []postgres.Option{postgres.WithTable(schema, "locker")}
}

// migratedOn returns a Backend on pool with its table in schema, migrated, closed in t.Cleanup.
func migratedOn(t testing.TB, pool *pgxpool.Pool, schema string) *postgres.Backend {
	t.Helper()
	b := postgres.New(pool, postgres.WithTable(schema, "locker"))
	t.Cleanup(b.Close)
	if err := b.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
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
