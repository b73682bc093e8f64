// Package postgres is a [locker.Locker] on PostgreSQL, through your own *pgxpool.Pool (pgx v5):
// the same reentrant, leased lock as the Redis backends, with shared and fair holds, grants,
// hand-offs, fencing tokens and semaphores (a [locker.Semaphorer] of up to [MaxLimit] permits,
// 65,536), for teams that run PostgreSQL and no Redis.
//
// Create the schema once with [Backend.Migrate], or run [SchemaSQL] (schema.sql) yourself. Every
// operation is one round trip: a call of one PL/pgSQL function, one transaction. A writer first
// takes a transaction-scoped advisory lock on its key (pg_advisory_xact_lock: concurrent calls on
// a key take turns, calls on other keys do not wait), then reads the database's clock
// (clock_timestamp(), after the lock: never the client's clock, nor a transaction start that
// waited), so leases live on the server. Holds are rows (key, owner) of name_holds, each with its
// own lease (a semaphore's permit too: its row also keeps the semaphore's limit and the permit's
// fencing token); a row whose lease has ended counts for nothing at once, and the next writer of
// the key deletes it (one new lock in 8 deletes some of other keys too, never waiting for their
// locks), so no sweeper runs. The wait queue (name_queue), the fencing counters (name_fences,
// kept for ever, seeded from the clock in microseconds) and the markers of retried requests
// (name_requests, kept for locker.RequestWindow) are tables beside it. Transactions must run at
// READ COMMITTED (others are refused). Nothing is kept in the session between statements, so a
// pool behind PgBouncer in transaction mode works (notices then need WithNoticeConnConfig).
//
// Release notices go by NOTIFY on one channel per table name (sent at commit), and the Backend
// LISTENs on a single connection of its own (the pool's ConnConfig, outside the pool, so that it
// never takes a connection the lock's calls wait for), whatever the number of keys waited on.
// Details and what differs from Redis: docs/postgres.md.
package postgres
