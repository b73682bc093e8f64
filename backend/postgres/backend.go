package postgres

import (
	"context"
	"math"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var (
	_ locker.Granter     = (*Backend)(nil)
	_ locker.Semaphorer  = (*Backend)(nil)
	_ locker.HandOffer   = (*Backend)(nil)
	_ locker.FenceRaiser = (*Backend)(nil)
)

// CallTimeout bounds a call whose ctx has no deadline: a database that stops answering gives an
// error, not a hang.
const CallTimeout = 10 * time.Second

// Backend is a [locker.Locker] (and a [locker.Granter], [locker.Semaphorer], [locker.HandOffer]
// and [locker.FenceRaiser]) on a PostgreSQL database, through the caller's *pgxpool.Pool. Every
// operation is one round trip: a call of one of the schema's functions (see [Backend.Migrate]),
// atomic on the server, with leases on the database's clock. It is safe for concurrent use;
// [Backend.Close] closes its release-notice connection (one of its own, made with the pool's
// ConnConfig, outside the pool).
type Backend struct {
	pool  *pgxpool.Pool
	names names
	sql   statements
	hub   *hub // nil WithoutNotices
	err   error

	closeOnce sync.Once
}

// New returns a Backend on pool, whose tables and functions must exist (Migrate creates them).
// It sends nothing until the first call. The pool stays the caller's: the Backend never closes
// it. An invalid Option makes every call return an error wrapping locker.ErrInvalid.
func New(pool *pgxpool.Pool, opts ...Option) *Backend {
	o := resolve(opts)
	b := &Backend{pool: pool, names: o.names, sql: o.names.statements(), err: o.err}
	if pool == nil && b.err == nil {
		b.err = display.Errorf("postgres: nil pool: %w", locker.ErrInvalid)
	}
	if !o.noNotices && b.err == nil {
		cfg := o.noticeCfg
		if cfg == nil {
			cfg = pool.Config().ConnConfig
		}
		b.hub = newHub(cfg, o.names.channel(), o.linger)
	}
	return b
}

// Close closes the Backend's release-notice connection (every subscription then gets no more
// notices; new ones fail with locker.ErrClosed). Other calls still work after Close. It may be
// called more than once.
func (b *Backend) Close() {
	b.closeOnce.Do(func() {
		if b.hub != nil {
			b.hub.close()
		}
	})
}

// An Option configures a Backend (New) and its schema (SchemaSQL): WithTable, WithoutNotices,
// WithNoticeConnConfig, WithNoticeLinger.
type Option func(*options)

type options struct {
	names     names
	noticeCfg *pgx.ConnConfig // WithNoticeConnConfig; nil: the pool's
	noNotices bool
	linger    time.Duration
	err       error
}

func resolve(opts []Option) options {
	o := options{names: names{schema: "public", name: "locker"}, linger: DefaultNoticeLinger}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// identifier is what WithTable accepts: a lower-case SQL identifier that needs no quoting, short
// enough for the suffixes the schema adds.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// WithTable sets the schema and the base name of the Backend's tables, functions and notice
// channel: name_holds, name_queue, name_fences, name_requests, name_acquire()… in schema. Both
// must be lower-case identifiers (letters, digits, _; at most 40 bytes), or every call returns
// an error wrapping locker.ErrInvalid. Default: WithTable("public", "locker").
func WithTable(schema, name string) Option {
	return func(o *options) {
		if !identifier.MatchString(schema) || !identifier.MatchString(name) {
			o.err = display.Errorf("postgres: WithTable(%q, %q): want lower-case identifiers of at most 40 bytes: %w", schema, name, locker.ErrInvalid)
			return
		}
		o.names = names{schema: schema, name: name}
	}
}

// WithoutNotices turns release notices off: Subscribe returns an error wrapping
// errors.ErrUnsupported, and waiting Clients wake on their retry strategy's timers. For a pool
// whose connections cannot LISTEN (PgBouncer in transaction mode). Default: notices on, over
// one connection of the Backend's own, made with the pool's ConnConfig.
func WithoutNotices() Option {
	return func(o *options) { o.noNotices = true }
}

// WithNoticeConnConfig makes the notice connection with cfg instead of the pool's ConnConfig:
// for a pool behind PgBouncer in transaction mode, where LISTEN cannot work, give the database's
// own address here (pgx.ParseConfig). A nil cfg is the default: the pool's ConnConfig.
func WithNoticeConnConfig(cfg *pgx.ConnConfig) Option {
	return func(o *options) { o.noticeCfg = cfg }
}

// DefaultNoticeLinger is how long the notice connection stays listening after its last
// subscription ended (WithNoticeLinger).
const DefaultNoticeLinger = time.Second

// WithNoticeLinger sets how long the notice connection stays open and listening after its last
// subscription ended, so that a key contended again soon needs no new connection. 0 closes it
// at once; a negative d makes every call return an error wrapping locker.ErrInvalid. Default:
// DefaultNoticeLinger (1s).
func WithNoticeLinger(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.err = display.Errorf("postgres: WithNoticeLinger(%v): negative: %w", d, locker.ErrInvalid)
			return
		}
		o.linger = d
	}
}

// bound returns ctx with a deadline CallTimeout away when it has none.
func bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, CallTimeout)
}

// millis returns d in whole milliseconds, rounded up, refusing d <= 0.
func millis(op string, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, display.Errorf("postgres: %s: ttl %v: %w", op, d, locker.ErrInvalid)
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 && ms < math.MaxInt64/int64(time.Millisecond) {
		ms++
	}
	return ms, nil
}

// orNil is s as a bytea parameter: NULL when empty.
func orNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
