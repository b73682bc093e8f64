package postgres

import (
	"context"
	_ "embed"
	"strings"

	"github.com/hashlock/locker/internal/display"
)

// schemaSQL is schema.sql: the tables and functions, with the default names (public, locker).
//
//go:embed schema.sql
var schemaSQL string

// names are the schema and base name of a Backend's objects (WithTable).
type names struct{ schema, name string }

// rename rewrites text written with the default names to n's.
func (n names) rename(text string) string {
	return strings.NewReplacer("public.", n.schema+".", "locker_", n.name+"_").Replace(text)
}

// channel is the notice channel's name, as pg_notify sends it.
func (n names) channel() string { return n.rename("public.locker_notices") }

// statements are the calls of a Backend, one per operation.
type statements struct {
	acquire, release, renew, inspect, force, dequeue, handOff, raise string
}

func (n names) statements() statements {
	call := func(fn, args string) string { return n.rename("select * from public.locker_" + fn + "(" + args + ")") }
	return statements{
		acquire: call("acquire", "$1, $2, $3, $4, $5, $6, $7, $8"),
		release: call("release", "$1, $2, $3, $4, $5"),
		renew:   call("renew", "$1, $2, $3"),
		inspect: call("inspect", "$1"),
		force:   call("force", "$1"),
		dequeue: call("dequeue", "$1, $2"),
		handOff: call("hand_off", "$1, $2, $3, $4, $5"),
		raise:   call("raise_fence", "$1, $2"),
	}
}

// SchemaSQL returns the SQL that creates the tables and functions a Backend with opts uses
// (schema.sql with the names of WithTable), for teams that manage their schema themselves. It
// needs no extension, and running it again is harmless. An invalid WithTable returns "".
func SchemaSQL(opts ...Option) string {
	o := resolve(opts)
	if o.err != nil {
		return ""
	}
	return o.names.rename(schemaSQL)
}

// Migrate creates the Backend's tables and functions if they are missing and replaces its
// functions with this version's (SchemaSQL), in one transaction, serialised with any other
// Migrate of the same names. It upgrades a schema of the previous version in place: its holds
// stay (as locks), the holds table gets the semaphores' columns and the queue table the limit
// of a permit's grant (its entries stay, waiting for locks), and the functions whose
// arguments or results changed (acquire, inspect) are dropped and made anew, so that processes
// of the previous version fail those calls from then on (docs/postgres.md, "Upgrading"). The
// schema (WithTable) must exist; the role needs CREATE on it and must own the tables.
func (b *Backend) Migrate(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return b.fail(ctx, "migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock(hashtext($1), 0)", b.names.channel()); err != nil {
		return b.fail(ctx, "migrate", err)
	}
	if _, err := tx.Exec(ctx, b.names.rename(schemaSQL)); err != nil {
		return display.Errorf("postgres: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return b.fail(ctx, "migrate", err)
	}
	return nil
}
