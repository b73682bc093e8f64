package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/quorum"
	redigolocker "github.com/hashlock/locker/backend/redigo"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
)

// redisEnv is the environment variable that gives the Redis URL when --redis is not given (to
// every command but demo).
const redisEnv = "LOCKER_REDIS"

// drivers are the values of --driver; the first is the default.
var drivers = []string{"goredis", "rueidis", "redigo"}

// connectTimeout bounds connecting to the server and the first PING.
const connectTimeout = 10 * time.Second

// connFlags are the values of --redis and --driver.
type connFlags struct {
	urls     urlList // one server, or the independent servers of a quorum
	driver   string
	embedded bool // no URL: start an embedded miniredis (demo); else $LOCKER_REDIS, else a usage error
}

// urlList is the value of --redis, which may be repeated.
type urlList []string

func (l *urlList) String() string { return strings.Join(*l, " ") }

func (l *urlList) Set(s string) error {
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
	fs.Var(&c.urls, "redis", "Redis server `URL`: redis://[user:password@]host:port[/db], or rediss:// for TLS (default "+def+"); repeat it for a quorum of 3 or 5 independent servers (backend/quorum)")
	fs.StringVar(&c.driver, "driver", c.driver, "Go Redis `driver`: goredis, rueidis or redigo")
	return c
}

// A conn is a locker.Locker on a Redis server through one driver.
type conn struct {
	locker.Locker
	desc string // the server and driver, for people: "Redis at redis://…, driver goredis"
	// down lists the servers of a quorum that did not answer at the start, with the reason
	// (the quorum tries them again as it goes).
	down  []string
	close func()
}

// connect checks the flags, connects to the server (or starts the embedded one) and PINGs it.
// Bad flags are a *usageError. The caller must call the conn's close.
func (c *connFlags) connect(ctx context.Context) (*conn, error) {
	if !slices.Contains(drivers, c.driver) {
		return nil, usagef("--driver %q: must be one of goredis, rueidis, redigo", c.driver)
	}
	if len(c.urls) > 1 {
		return c.connectQuorum(ctx)
	}
	raw := ""
	if len(c.urls) == 1 {
		raw = c.urls[0]
	}
	if raw == "" && !c.embedded {
		if raw = os.Getenv(redisEnv); raw == "" {
			return nil, usagef("no Redis server: pass --redis URL or set %s", redisEnv)
		}
	}
	if raw == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true) // leases expire by the wall clock, as on Redis
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("start the embedded miniredis: %w", err)
		}
		cn, err := dial(ctx, c.driver, "redis://"+m.Addr())
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

// connectURL connects to the server at raw.
func (c *connFlags) connectURL(ctx context.Context, raw string) (*conn, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, usagef("--redis: want redis://[user:password@]host:port[/db] or rediss://…, got %s", redacted(raw))
	}
	cn, err := dial(ctx, c.driver, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	cn.desc = "Redis at " + u.Redacted() + ", driver " + c.driver
	return cn, nil
}

// connectQuorum connects to every server of a quorum at once. A minority of them may be down
// at the start, as later: those become nodes that connect when their server answers (the
// conn's down lists them). The same server twice is a usage error: its votes would count twice.
func (c *connFlags) connectQuorum(ctx context.Context) (*conn, error) {
	if len(c.urls) < 3 {
		return nil, usagef("--redis given %d times: a quorum needs 3 or more independent servers (3 or 5)", len(c.urls))
	}
	seen := map[string]string{}
	for _, raw := range c.urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return nil, usagef("--redis: want redis://[user:password@]host:port[/db] or rediss://…, got %s", redacted(raw))
		}
		id := serverID(u)
		if first, ok := seen[id]; ok {
			return nil, usagef("--redis %s and %s: the same server (%s) twice; a quorum needs independent servers", first, u.Redacted(), id)
		}
		seen[id] = u.Redacted()
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
		u, _ := url.Parse(raw)
		n := &lazyNode{url: u.Redacted(), lastErr: r.err, next: time.Now().Add(redialEvery),
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
		return nil, fmt.Errorf("a quorum of %d servers needs %d, %d answered: %w", len(nodes), majority, up, errors.Join(errs...))
	}
	return &conn{
		Locker: quorum.New(nodes...),
		desc:   fmt.Sprintf("a quorum of %d Redis servers (a majority of %d decides), driver %s", len(nodes), majority, c.driver),
		down:   down,
		close:  closeAll,
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

// dial makes a Locker of driver on the server at the URL raw and PINGs the server.
func dial(ctx context.Context, driver, raw string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	switch driver {
	case "rueidis":
		opt, err := rueidis.ParseURL(raw)
		if err != nil {
			return nil, usagef("--redis: %v", err)
		}
		opt.DisableCache = true // the lock does not use it, and it needs CLIENT TRACKING
		rc, err := rueidis.NewClient(opt)
		if err != nil {
			return nil, err
		}
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			rc.Close()
			return nil, err
		}
		return &conn{Locker: rueidislocker.New(rc), close: rc.Close}, nil
	case "redigo":
		c, err := redigo.DialURLContext(ctx, raw)
		if err == nil {
			_, err = redigo.DoContext(c, ctx, "PING")
			c.Close()
		}
		if err != nil {
			return nil, err
		}
		pool := &redigo.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialURLContext(ctx, raw)
		}}
		return &conn{Locker: redigolocker.New(pool), close: func() { pool.Close() }}, nil
	default:
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, usagef("--redis: %v", err)
		}
		opt.ContextTimeoutEnabled = true
		rdb := redis.NewClient(opt)
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, err
		}
		return &conn{Locker: goredis.New(rdb), close: func() { rdb.Close() }}, nil
	}
}

// redacted returns the URL raw with its password, if any, replaced by "xxxxx"; a URL that does not
// parse is withheld whole, as it may hold a password.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "an invalid URL"
	}
	return fmt.Sprintf("%q", u.Redacted())
}

// warnDown prints, for the command name, one line per quorum server that did not answer at the
// start.
func (cn *conn) warnDown(s *streams, name string) {
	for _, why := range cn.down {
		fmt.Fprintf(s.err, "locker %s: warning: %s; going on with the majority that answered\n", name, why)
	}
}
