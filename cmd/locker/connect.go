package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/quorum"
	redigolocker "github.com/hashlock/locker/backend/redigo"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	valkeylocker "github.com/hashlock/locker/backend/valkey"
	"github.com/hashlock/locker/internal/display"
)

// redisEnv is the environment variable that gives the Redis URL when --redis is not given (to
// every command but demo).
const redisEnv = "LOCKER_REDIS"

// passwordEnv is the environment variable that gives the Redis password for the URLs that carry
// none (user:password@), unless --redis-password-file is given. Unlike a password in --redis,
// ps does not show it. locker run passes neither it nor redisEnv to its command.
const passwordEnv = "LOCKER_REDIS_PASSWORD"

// drivers are the values of --driver; the first is the default.
var drivers = []string{"goredis", "rueidis", "redigo", "valkey"}

// connectTimeout bounds connecting to the server and the first PING.
const connectTimeout = 10 * time.Second

// connFlags are the values of --redis and --driver.
type connFlags struct {
	urls     urlList // one server, or the independent servers of a quorum
	driver   string
	embedded bool // no URL: start an embedded miniredis (demo); else $LOCKER_REDIS, else a usage error
	// passwordFile is --redis-password-file: its first line is the password of the URLs that
	// carry none; without it, $LOCKER_REDIS_PASSWORD is.
	passwordFile string
	// holdKey is the key of a locker run: given no server, it takes the servers of the
	// enclosing run's hold on that key (see inheritedServers).
	holdKey string

	password string // set by connect: the password of the URLs that carry none, or ""

	// tls is --redis-ca, --redis-cert, --redis-key and --redis-insecure-skip-verify: the TLS
	// options of every rediss:// URL that does not have its own in its query.
	tls tlsOptions

	// postgres is --postgres: lock on this PostgreSQL database instead of Redis; pgTable is
	// --postgres-table.
	postgres, pgTable string
}

// urlList is the value of --redis, which may be repeated.
type urlList []string

func (l *urlList) String() string { return strings.Join(*l, " ") }

func (l *urlList) Set(s string) error {
	if s == "" {
		return errors.New("the URL is empty")
	}
	*l = append(*l, s)
	return nil
}

// addConnFlags registers --redis and --driver on fs. With embedded, a command without --redis
// runs on an embedded miniredis; without, it needs --redis or $LOCKER_REDIS.
func addConnFlags(fs *flag.FlagSet, embedded bool) *connFlags {
	c := &connFlags{driver: drivers[0], embedded: embedded}
	def := "$" + redisEnv
	if embedded {
		def = "an embedded miniredis"
	}
	fs.Var(&c.urls, "redis", "Redis server `URL`: redis://[[user:]password@]host[:port][/db][?client_name=NAME], or rediss:// for TLS, which also takes ?ca_file=, cert_file=, key_file=, skip_verify=true (default "+def+"); repeat it for a quorum of 3 or 5 independent servers (backend/quorum)")
	fs.StringVar(&c.driver, "driver", c.driver, "Go Redis `driver`: goredis, rueidis, redigo or valkey (valkey-go)")
	fs.StringVar(&c.tls.caFile, "redis-ca", "", "rediss://: trust the CA certificates of the PEM `FILE` too, besides the system's (default: the system's alone, which $SSL_CERT_FILE replaces)")
	fs.StringVar(&c.tls.certFile, "redis-cert", "", "rediss://: offer the client certificate of the PEM `FILE` (with --redis-key) to a server that asks for one")
	fs.StringVar(&c.tls.keyFile, "redis-key", "", "rediss://: the private key (PEM `FILE`) of --redis-cert")
	fs.BoolVar(&c.tls.skipVerify, "redis-insecure-skip-verify", false, "rediss://: do not verify the server's certificate (test servers only: anyone on the path could pose as the server)")
	fs.StringVar(&c.postgres, "postgres", "", "PostgreSQL `URL` (postgres://[user[:password]@]host[:port]/db[?sslmode=…], as pgx takes it; the password also from $PGPASSWORD or ~/.pgpass): lock on PostgreSQL instead of Redis (backend/postgres; the tables are created at first use)")
	fs.StringVar(&c.pgTable, "postgres-table", "public.locker", "--postgres: the `SCHEMA.NAME` of the lock's tables and functions (backend/postgres WithTable)")
	fs.StringVar(&c.passwordFile, "redis-password-file", "", "read the Redis password from the first line of `FILE`, for each --redis URL without a password (redis://host or redis://user@host): ps does not show it, as it shows --redis (default $"+passwordEnv+")")
	return c
}

// A conn is a locker.Locker on a Redis server through one driver.
type conn struct {
	locker.Locker
	desc string // the server and driver, for people: "Redis at redis://…, driver goredis"
	// down lists the servers of a quorum that did not answer at the start, with the reason
	// (the quorum tries them again as it goes).
	down []string
	// warnings are printed before down's: a server whose certificate is not verified.
	warnings []string
	close    func()
}

// connect checks the flags, connects to the server (or starts the embedded one) and PINGs it.
// Bad flags are a *usageError; a server that cannot be used (unreachable, refusing the TLS
// handshake or the credentials, a quorum without its majority) an *exitError with
// exitUnavailable. The caller must call the conn's close.
func (c *connFlags) connect(ctx context.Context) (*conn, error) {
	cn, err := c.open(ctx)
	if err != nil {
		if _, ok := asError[*usageError](err); !ok {
			err = &exitError{exitUnavailable, err}
		}
	}
	return cn, err
}

// open is connect without the exit code.
func (c *connFlags) open(ctx context.Context) (*conn, error) {
	if !slices.Contains(drivers, c.driver) {
		return nil, usagef("--driver %q: must be one of %s", c.driver, strings.Join(drivers, ", "))
	}
	pw, err := c.readPassword()
	if err != nil {
		return nil, err
	}
	c.password = pw
	if c.postgres != "" {
		if len(c.urls) > 0 {
			return nil, usagef("--postgres and --redis: give one")
		}
		return c.connectPostgres(ctx, c.postgres)
	}
	if len(c.urls) == 0 && !c.embedded && os.Getenv(redisEnv) == "" {
		// Inside a locker run, whose command has no $LOCKER_REDIS: its servers.
		c.urls = c.inheritedServers()
		if len(c.urls) == 0 {
			return nil, usagef("no Redis server: pass --redis URL or set %s, or --postgres URL", redisEnv)
		}
		if len(c.urls) == 1 && isPostgresURL(c.urls[0]) { // an outer run's database
			return c.connectPostgres(ctx, c.urls[0])
		}
	}
	if len(c.urls) > 1 {
		return c.connectQuorum(ctx)
	}
	raw := ""
	if len(c.urls) == 1 {
		raw = c.urls[0]
	}
	if raw == "" && !c.embedded {
		raw = os.Getenv(redisEnv)
	}
	if raw == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true) // leases expire by the wall clock, as on Redis
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("start the embedded miniredis: %w", err)
		}
		r, err := parseRedisURL("redis://"+m.Addr(), "")
		if err != nil {
			m.Close()
			return nil, err
		}
		cn, err := dial(ctx, c.driver, r, nil)
		if err != nil {
			m.Close()
			return nil, err
		}
		cn.desc = "embedded miniredis (not a real Redis; timings are not Redis timings), driver " + c.driver
		closeDriver := cn.close
		cn.close = func() { closeDriver(); m.Close() }
		return cn, nil
	}
	return c.connectURL(ctx, raw)
}

// readPassword returns the password for the URLs that carry none: the first line of
// --redis-password-file, else $LOCKER_REDIS_PASSWORD, else "".
func (c *connFlags) readPassword() (string, error) {
	if c.passwordFile == "" {
		return os.Getenv(passwordEnv), nil
	}
	b, err := os.ReadFile(c.passwordFile)
	if err != nil {
		return "", usagef("--redis-password-file: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSuffix(line, "\r"); line == "" {
		return "", usagef("--redis-password-file %s: the first line is empty", c.passwordFile)
	}
	return line, nil
}

// parse reads the URL raw (with c.password if raw has none) and its TLS options (with the
// flags'): bad ones are a *usageError.
func (c *connFlags) parse(raw string) (*redisURL, *tls.Config, error) {
	r, err := parseRedisURL(raw, c.password)
	if err != nil {
		return nil, nil, err
	}
	r.tlsOpts = r.tlsOpts.or(c.tls)
	cfg, err := r.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	return r, cfg, nil
}

// connectURL connects to the server at raw (with c.password if raw has none).
func (c *connFlags) connectURL(ctx context.Context, raw string) (*conn, error) {
	r, cfg, err := c.parse(raw)
	if err != nil {
		return nil, err
	}
	cn, err := dial(ctx, c.driver, r, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	cn.desc = "Redis at " + r.String() + ", driver " + c.driver
	if cfg != nil && cfg.InsecureSkipVerify {
		cn.warnings = append(cn.warnings, insecureWarning(r))
	}
	return cn, nil
}

// inheritedServers returns the servers of the hold that an enclosing locker run passed in
// holdsEnv, as serverIDs gives them (with no credentials: the password comes from
// --redis-password-file or $LOCKER_REDIS_PASSWORD): the hold on c.holdKey if there is one, else
// the innermost. None outside a locker run.
func (c *connFlags) inheritedServers() []string {
	holds := inheritedHolds()
	for i := len(holds) - 1; i >= 0; i-- {
		if c.holdKey != "" && holds[i].Key == c.holdKey && len(holds[i].Servers) > 0 {
			return slices.Clone(holds[i].Servers)
		}
	}
	if len(holds) > 0 {
		return slices.Clone(holds[len(holds)-1].Servers)
	}
	return nil
}

// connectQuorum connects to every server of a quorum at once. A minority of them may be down
// at the start, as later: those become nodes that connect when their server answers (the
// conn's down lists them). The same server twice is a usage error: its votes would count twice.
func (c *connFlags) connectQuorum(ctx context.Context) (*conn, error) {
	if len(c.urls) < 3 {
		return nil, usagef("--redis given %d times: a quorum needs 3 or more independent servers (3 or 5)", len(c.urls))
	}
	seen := map[string]string{}
	var warnings []string
	for _, raw := range c.urls {
		r, cfg, err := c.parse(raw)
		if err != nil {
			return nil, err
		}
		if cfg != nil && cfg.InsecureSkipVerify {
			warnings = append(warnings, insecureWarning(r))
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err // parse accepted it
		}
		id := serverID(u)
		if first, ok := seen[id]; ok {
			return nil, usagef("--redis %s and %s: the same server (%s) twice; a quorum needs independent servers", first, redactURL(raw), id)
		}
		seen[id] = redactURL(raw)
	}

	type result struct {
		cn  *conn
		err error
	}
	results := make([]result, len(c.urls))
	var wg sync.WaitGroup
	for i, raw := range c.urls {
		wg.Go(func() {
			cn, err := c.connectURL(ctx, raw)
			results[i] = result{cn, err}
		})
	}
	wg.Wait()

	var (
		nodes   []locker.Locker
		closers []func()
		down    []string
		errs    []error
	)
	for i, r := range results {
		if r.err == nil {
			nodes, closers = append(nodes, r.cn.Locker), append(closers, r.cn.close)
			continue
		}
		raw := c.urls[i]
		n := &lazyNode{url: redactURL(raw), lastErr: r.err, next: time.Now().Add(redialEvery),
			dial: func(ctx context.Context) (*conn, error) { return c.connectURL(ctx, raw) }}
		nodes, closers = append(nodes, n), append(closers, n.close)
		down, errs = append(down, errorText(r.err)), append(errs, r.err)
	}
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	majority := len(nodes)/2 + 1
	if up := len(nodes) - len(down); up < majority {
		closeAll()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, display.Errorf("a quorum of %d servers needs %d, %d answered: %w", len(nodes), majority, up, errors.Join(errs...))
	}
	return &conn{
		Locker:   quorum.New(nodes...),
		desc:     fmt.Sprintf("a quorum of %d Redis servers (a majority of %d decides), driver %s", len(nodes), majority, c.driver),
		down:     down,
		warnings: warnings,
		close:    closeAll,
	}, nil
}

// serverID names the server a URL points at, to find the same one given twice: its host in
// lower case ("localhost" as 127.0.0.1) and port (6379 by default). The database number and
// credentials do not count: two databases of one server fail together.
func serverID(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "6379"
	}
	return net.JoinHostPort(host, port)
}

// dial makes a Locker of driver on the server r, over TLS with cfg unless it is nil, and PINGs
// the server. Every driver gets the same address, credentials, database, client name and TLS
// configuration. With TLS, checkTLS does a handshake first, so that a failed one is reported at
// once as a *tlsError, on every driver.
func dial(ctx context.Context, driver string, r *redisURL, cfg *tls.Config) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if cfg != nil {
		if err := checkTLS(ctx, r.addr(), cfg); err != nil {
			return nil, err
		}
	}
	switch driver {
	case "rueidis":
		rc, err := rueidis.NewClient(rueidisOptions(r, cfg))
		if err != nil {
			return nil, err
		}
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			rc.Close()
			return nil, err
		}
		return &conn{Locker: rueidislocker.New(rc), close: rc.Close}, nil
	case "valkey":
		vc, err := valkey.NewClient(valkeyOptions(r, cfg))
		if err != nil {
			return nil, err
		}
		if err := vc.Do(ctx, vc.B().Ping().Build()).Error(); err != nil {
			vc.Close()
			return nil, err
		}
		return &conn{Locker: valkeylocker.New(vc), close: vc.Close}, nil
	case "redigo":
		opts := redigoOptions(r, cfg)
		c, err := redigo.DialContext(ctx, "tcp", r.addr(), opts...)
		if err == nil {
			_, err = redigo.DoContext(c, ctx, "PING")
			c.Close()
		}
		if err != nil {
			return nil, err
		}
		pool := &redigo.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialContext(ctx, "tcp", r.addr(), opts...)
		}}
		return &conn{Locker: redigolocker.New(pool), close: func() { pool.Close() }}, nil
	default:
		rdb := redis.NewClient(goredisOptions(r, cfg))
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, err
		}
		return &conn{Locker: goredis.New(rdb), close: func() { rdb.Close() }}, nil
	}
}

// goredisOptions are go-redis's options for r and cfg; ContextTimeoutEnabled, so that a call
// ends with its ctx.
func goredisOptions(r *redisURL, cfg *tls.Config) *redis.Options {
	return &redis.Options{Addr: r.addr(), Username: r.user, Password: r.password, DB: r.db,
		ClientName: r.name, TLSConfig: cfg, ContextTimeoutEnabled: true}
}

// rueidisOptions are rueidis's options for r and cfg, without its client-side cache: the lock
// does not use it, and it needs CLIENT TRACKING.
func rueidisOptions(r *redisURL, cfg *tls.Config) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{r.addr()}, Username: r.user, Password: r.password,
		SelectDB: r.db, ClientName: r.name, TLSConfig: cfg, DisableCache: true}
}

// valkeyOptions are valkey-go's options for r and cfg: rueidisOptions (valkey-go is a fork of
// rueidis), also without the client-side cache.
func valkeyOptions(r *redisURL, cfg *tls.Config) valkey.ClientOption {
	return valkey.ClientOption{InitAddress: []string{r.addr()}, Username: r.user, Password: r.password,
		SelectDB: r.db, ClientName: r.name, TLSConfig: cfg, DisableCache: true}
}

// redigoOptions are Redigo's dial options for r and cfg.
func redigoOptions(r *redisURL, cfg *tls.Config) []redigo.DialOption {
	opts := []redigo.DialOption{redigo.DialDatabase(r.db), redigo.DialUseTLS(cfg != nil), redigo.DialTLSConfig(cfg)}
	if r.user != "" {
		opts = append(opts, redigo.DialUsername(r.user))
	}
	if r.password != "" {
		opts = append(opts, redigo.DialPassword(r.password))
	}
	if r.name != "" {
		opts = append(opts, redigo.DialClientName(r.name))
	}
	return opts
}

// redactURL returns the Redis URL raw for people, without what may be a secret; every URL that
// locker prints or writes goes through it. The user information becomes "xxxxx", as Redigo and
// redis-cli take a user name alone for the password (redis://xxxxx@host:6379/0), except a user
// name followed by a password, which shows (redis://alice:xxxxx@host); each value of the query
// becomes "xxxxx" (?password=xxxxx), and a query word without a value "xxxxx" too; a fragment is
// dropped. A URL that does not parse, or that has no "//" (redis:secret@host), is withheld
// whole.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return invalidURL
	}
	out := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User != nil {
		out.User = url.User(secretMask)
		if pw, ok := u.User.Password(); ok && pw != "" {
			out.User = url.UserPassword(u.User.Username(), secretMask)
		}
	}
	s := out.String()
	if u.RawQuery != "" || u.ForceQuery {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if key, _, ok := strings.Cut(p, "="); ok {
				parts[i] = key + "=" + secretMask
			} else if p != "" {
				parts[i] = secretMask
			}
		}
		s += "?" + strings.Join(parts, "&")
	}
	return s
}

// urlError is the usage error for the URL raw that a driver refused with err: err's text
// without the values of raw's query, which drivers quote when they do not parse them
// (?dial_timeout=…).
func urlError(raw string, err error) error {
	msg := err.Error()
	if u, perr := url.Parse(raw); perr == nil {
		for _, p := range strings.Split(u.RawQuery, "&") {
			_, v, _ := strings.Cut(p, "=")
			for _, s := range []string{v, unescapeQuery(v)} {
				if s != "" {
					msg = strings.ReplaceAll(msg, s, secretMask)
				}
			}
		}
	}
	return usagef("--redis: %s", msg)
}

// unescapeQuery is the query value v unescaped, or v if it does not unescape.
func unescapeQuery(v string) string {
	if s, err := url.QueryUnescape(v); err == nil {
		return s
	}
	return v
}

// secretMask stands for a secret in a redacted URL; invalidURL for a URL withheld whole.
const (
	secretMask = "xxxxx"
	invalidURL = "an invalid URL (not shown: it may hold a password)"
)

// quotedURL is redactURL(raw) quoted, for a usage error.
func quotedURL(raw string) string {
	if r := redactURL(raw); r != invalidURL {
		return strconv.Quote(r)
	}
	return invalidURL
}

// warnDown prints, for the command name, one line per server whose certificate is not verified,
// then one per quorum server that did not answer at the start.
func (cn *conn) warnDown(s *streams, name string) {
	for _, w := range cn.warnings {
		fmt.Fprintf(s.err, "locker %s: warning: %s\n", name, w)
	}
	for _, why := range cn.down {
		fmt.Fprintf(s.err, "locker %s: warning: %s; going on with the majority that answered\n", name, why)
	}
}
