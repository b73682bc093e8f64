package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hashlock/locker/backend/postgres"
)

// isPostgresURL reports whether raw is a PostgreSQL URL (postgres:// or postgresql://), which
// --postgres takes and an outer locker run may pass to a nested one.
func isPostgresURL(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// postgresTable splits --postgres-table (SCHEMA.NAME, or NAME in schema public).
func postgresTable(v string) (schema, name string) {
	if s, n, ok := strings.Cut(v, "."); ok {
		return s, n
	}
	return "public", v
}

// connectPostgres makes a Locker on the PostgreSQL database at raw (a URL as pgx takes it: the
// password from the URL, else $PGPASSWORD or ~/.pgpass), pings it, and creates the schema
// (backend/postgres Migrate) when its functions are missing. The pool has at most 4 connections:
// the lock's calls, the watchdog's renewals and the notice listener.
func (c *connFlags) connectPostgres(ctx context.Context, raw string) (*conn, error) {
	schema, name := postgresTable(c.pgTable)
	opts := []postgres.Option{postgres.WithTable(schema, name)}
	if postgres.SchemaSQL(opts...) == "" {
		return nil, usagef("--postgres-table %q: want NAME or SCHEMA.NAME, lower-case identifiers of at most 40 bytes", c.pgTable)
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, usagef("--postgres %s: %v", redactPostgres(raw), urlError(raw, err))
	}
	if !strings.Contains(raw, "pool_max_conns") {
		cfg.MaxConns = 4
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redactPostgres(raw), err)
	}
	b := postgres.New(pool, opts...)
	closeAll := func() { b.Close(); pool.Close() }
	var exists bool
	if err := pool.QueryRow(ctx, "select to_regproc($1) is not null", schema+"."+name+"_acquire").Scan(&exists); err != nil {
		closeAll()
		return nil, fmt.Errorf("%s: %w", redactPostgres(raw), err)
	}
	if !exists {
		if err := b.Migrate(ctx); err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: create the lock's tables and functions: %w", redactPostgres(raw), err)
		}
	}
	return &conn{Locker: b, desc: "PostgreSQL at " + redactPostgres(raw) + ", table " + schema + "." + name, close: closeAll}, nil
}

// redactPostgres returns the PostgreSQL URL raw for people: its password and every query value
// become "xxxxx" (the user name stays: in a PostgreSQL URL it is never the password), a
// fragment is dropped, and a connection string that is not a URL (host=… password=…) is
// withheld whole.
func redactPostgres(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || !isPostgresURL(raw) {
		return invalidURL
	}
	out := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User != nil {
		out.User = url.User(u.User.Username())
		if _, ok := u.User.Password(); ok {
			out.User = url.UserPassword(u.User.Username(), secretMask)
		}
	}
	s := out.String()
	if red := redactURL(raw); strings.Contains(red, "?") {
		s += red[strings.Index(red, "?"):] // the query, its values masked
	}
	return s
}

// postgresID is the database raw points at, as locker run passes it to nested runs: the URL
// without its passwords, in the user information or the query (a nested run takes them from
// $PGPASSWORD or ~/.pgpass), the rest kept, since a nested run connects with it (user, TLS
// options).
func postgresID(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	q.Del("password")
	q.Del("sslpassword")
	u.RawQuery, u.Fragment = q.Encode(), ""
	return u.String()
}
