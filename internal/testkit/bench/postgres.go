package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
)

// Postgres returns the Lib of our Client on backend/postgres at url (a pgx URL) with opts, each client
// with a pool of its own (pgx's default size unless url says pool_max_conns, at least 8 so
// that the 64-goroutine scenario does not queue on 2 connections), after creating the schema
// (Migrate). Its floor is what a PostgreSQL user writes without us: a transaction that takes
// pg_advisory_xact_lock on the key and commits (BEGIN, SELECT, COMMIT: 3 round trips, a lock
// with no lease, no re-entry, no fencing).
func Postgres(ctx context.Context, url string, opts ...postgres.Option) (Lib, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return Lib{}, fmt.Errorf("postgres: %w", err)
	}
	cfg.MaxConns = max(cfg.MaxConns, 8)
	newPool := func() (*pgxpool.Pool, error) { return pgxpool.NewWithConfig(context.Background(), cfg.Copy()) }
	pool, err := newPool()
	if err != nil {
		return Lib{}, fmt.Errorf("postgres: %w", err)
	}
	defer pool.Close()
	b := postgres.New(pool, opts...)
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		return Lib{}, err
	}
	lib := Ours("postgres", "postgres",
		func() (locker.Locker, func(), error) {
			p, err := newPool()
			if err != nil {
				return nil, nil, err
			}
			b := postgres.New(p, opts...)
			return b, func() { b.Close(); p.Close() }, nil
		},
		func() (FloorOp, func(), error) {
			p, err := newPool()
			if err != nil {
				return nil, nil, err
			}
			key := newKey("floor")
			return func(ctx context.Context) error {
				tx, err := p.Begin(ctx)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", key); err != nil {
					tx.Rollback(ctx) //nolint:errcheck // the Exec's error says it
					return err
				}
				return tx.Commit(ctx)
			}, p.Close, nil
		})
	lib.ServerConns = func() (ConnCount, func(), error) {
		p, err := newPool()
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) (Conns, error) {
			var c Conns
			err := p.QueryRow(ctx, "select count(*), count(*) filter (where query ilike 'listen %') from pg_stat_activity where backend_type = 'client backend'").Scan(&c.All, &c.PubSub)
			return c, err
		}, p.Close, nil
	}
	return lib, nil
}
