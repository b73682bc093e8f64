package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	redigolib "github.com/gomodule/redigo/redis"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/backend/rediscore"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	valkeylocker "github.com/hashlock/locker/backend/valkey"
)

// floorScript is the raw floor's script: the least work a script call can do.
const floorScript = "return 1"

// Ours returns the Lib of our Client on the backends that open makes: each client gets a fresh
// backend (with connections of its own) under a Counter, and a locker.Client with opts.
func Ours(name, driver string, open func() (locker.Locker, func(), error), floor func() (FloorOp, func(), error), opts ...locker.Option) Lib {
	return Lib{
		Name:      name,
		Driver:    driver,
		Reentrant: true,
		Floor:     floor,
		Backend:   open,
		opts:      opts,
		Open: func() (Mutex, func(), error) {
			be, closeBackend, err := open()
			if err != nil {
				return nil, nil, err
			}
			cnt := Count(be)
			c := locker.New(cnt.Backend(), opts...)
			return &ourMutex{c: c, cnt: cnt}, func() {
				c.Close()
				closeBackend()
			}, nil
		},
	}
}

// WithClientOptions returns lib, when it is ours (made by Ours), with opts added to the options
// of every Client it makes (the watchdog scenario's too); another lib as it is. locker bench
// --metrics adds its Observer so.
func WithClientOptions(lib Lib, opts ...locker.Option) Lib {
	if lib.Backend == nil {
		return lib
	}
	ours := Ours(lib.Name, lib.Driver, lib.Backend, lib.Floor, append(slices.Clip(lib.opts), opts...)...)
	ours.ScriptFloor, ours.ServerConns = lib.ScriptFloor, lib.ServerConns
	return ours
}

// ourMutex is a locker.Client as a Mutex.
type ourMutex struct {
	c   *locker.Client
	cnt *Counter
}

func (m *ourMutex) Lock(ctx context.Context, key string) (Held, error) {
	l, err := m.c.Lock(ctx, key)
	if err != nil {
		return nil, err // not a nil *Lease in a non-nil Held
	}
	return l, nil
}

// Calls returns the backend calls of the client so far.
func (m *ourMutex) Calls() Calls { return m.cnt.Calls() }

// counted is a Mutex that counts its backend calls.
type counted interface{ Calls() Calls }

// callsOf returns the sum of the calls of the distinct counted mutexes of ms, and whether any
// was counted.
func callsOf(ms ...Mutex) (Calls, bool) {
	var sum Calls
	seen := make(map[Mutex]bool)
	ok := false
	for _, m := range ms {
		if c, is := m.(counted); is && !seen[m] {
			seen[m] = true
			sum = sum.Add(c.Calls())
			ok = true
		}
	}
	return sum, ok
}

// Memory returns the Lib of our Client on the in-process memory backend: no network, so its
// results are the Client's own costs. Every client of the Lib shares one store, as clients of
// one server would.
func Memory() Lib {
	be := memory.New()
	return Ours("memory", "memory", func() (locker.Locker, func(), error) {
		return be, func() {}, nil
	}, nil)
}

// RedisOptions adjusts the Redis drivers.
type RedisOptions struct {
	// DisableClientCache turns off rueidis's and valkey-go's client-side caching, which needs
	// CLIENT TRACKING (miniredis has none).
	DisableClientCache bool
	// PoolSize is Redigo's pool size (MaxIdle; MaxActive stays unlimited); default 64, so the
	// 64-goroutine scenario does not dial a connection per call.
	PoolSize int
	// TLSConfig, if not nil, is every driver's TLS configuration for a rediss:// URL, instead
	// of the default one (the system's roots, the URL's host name, TLS 1.2 or later).
	TLSConfig *tls.Config
}

// redisURL reads url once, as go-redis's ParseURL does (redis[s]://[[user]:password@]host[:port]
// [/db] and go-redis's query options), and gives every driver the same address, credentials,
// database, client name and TLS configuration: go-redis's options (with ContextTimeoutEnabled),
// rueidis's, and Redigo's dial options.
func redisURL(url string, o RedisOptions) (*goredislib.Options, rueidis.ClientOption, []redigolib.DialOption, error) {
	gopt, err := goredislib.ParseURL(url)
	if err != nil {
		return nil, rueidis.ClientOption{}, nil, fmt.Errorf("go-redis: %w", err)
	}
	gopt.ContextTimeoutEnabled = true
	if gopt.TLSConfig != nil && o.TLSConfig != nil {
		gopt.TLSConfig = o.TLSConfig
	}
	ropt := rueidis.ClientOption{InitAddress: []string{gopt.Addr}, Username: gopt.Username, Password: gopt.Password,
		SelectDB: gopt.DB, ClientName: gopt.ClientName, TLSConfig: gopt.TLSConfig, DisableCache: o.DisableClientCache}
	dopts := []redigolib.DialOption{redigolib.DialDatabase(gopt.DB), redigolib.DialUsername(gopt.Username),
		redigolib.DialPassword(gopt.Password), redigolib.DialClientName(gopt.ClientName),
		redigolib.DialUseTLS(gopt.TLSConfig != nil), redigolib.DialTLSConfig(gopt.TLSConfig)}
	return gopt, ropt, dopts, nil
}

// Redis returns the Libs of our Client on every Redis driver, each client with its own
// connections to the server at url ("redis://host:port/db", read once for every driver, as
// go-redis's ParseURL reads it): go-redis, go-redis through its AutoPipeline, rueidis, Redigo
// and valkey-go. go-redis clients are created with ContextTimeoutEnabled, Redigo pools with MaxIdle
// o.PoolSize (Redigo's default, 0, would dial a connection per call); everything else keeps the
// drivers' defaults.
func Redis(url string, o RedisOptions) ([]Lib, error) {
	gopt, ropt, dopts, err := redisURL(url, o)
	if err != nil {
		return nil, err
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 64
	}
	newGoredis := func() *goredislib.Client {
		opt := *gopt
		return goredislib.NewClient(&opt)
	}
	newPool := func() *redigolib.Pool {
		return &redigolib.Pool{
			MaxIdle: o.PoolSize,
			DialContext: func(ctx context.Context) (redigolib.Conn, error) {
				return redigolib.DialContext(ctx, "tcp", gopt.Addr, dopts...)
			},
		}
	}

	openGoredis := func() (goredislib.UniversalClient, func(), error) {
		c := newGoredis()
		return c, func() { c.Close() }, nil
	}
	// go-redis v9.23 has an (experimental) AutoPipeline: a blocking AutoPipeliner, which is a
	// redis.UniversalClient, batches the commands of concurrent callers into pipelines. It
	// can only help where calls overlap (parallel and shared-client contention).
	openAuto := func() (goredislib.UniversalClient, func(), error) {
		c := newGoredis()
		ap, err := c.AutoPipeline()
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("go-redis AutoPipeline: %w", err)
		}
		return ap, func() { c.Close() }, nil // closes ap too
	}
	goredisLib := func(name string, open func() (goredislib.UniversalClient, func(), error)) Lib {
		lib := Ours(name, name,
			func() (locker.Locker, func(), error) {
				c, done, err := open()
				if err != nil {
					return nil, nil, err
				}
				return goredis.New(c), done, nil
			},
			func() (FloorOp, func(), error) {
				c, done, err := open()
				if err != nil {
					return nil, nil, err
				}
				return GoredisFloor(c), done, nil
			})
		lib.ScriptFloor = func() (FloorOp, func(), error) {
			c, done, err := open()
			if err != nil {
				return nil, nil, err
			}
			return goredisScripts(c), done, nil
		}
		return lib
	}

	rueidisLib := clientLib("rueidis", func() (rueidis.Client, error) { return rueidis.NewClient(ropt) },
		func(c rueidis.Client) locker.Locker { return rueidislocker.New(c) }, RueidisFloor, rueidisScripts)
	// valkey-go reads the options rueidis does (it is a fork).
	vopt := valkey.ClientOption{InitAddress: ropt.InitAddress, Username: ropt.Username, Password: ropt.Password,
		SelectDB: ropt.SelectDB, ClientName: ropt.ClientName, TLSConfig: ropt.TLSConfig, DisableCache: ropt.DisableCache}
	valkeyLib := clientLib("valkey", func() (valkey.Client, error) { return valkey.NewClient(vopt) },
		func(c valkey.Client) locker.Locker { return valkeylocker.New(c) }, valkeyFloor, valkeyScripts)

	redigoLib := Ours("redigo", "redigo",
		func() (locker.Locker, func(), error) {
			p := newPool()
			return redigo.New(p), func() { p.Close() }, nil
		},
		func() (FloorOp, func(), error) {
			p := newPool()
			return redigoFloor(p), func() { p.Close() }, nil
		})
	redigoLib.ScriptFloor = func() (FloorOp, func(), error) {
		p := newPool()
		return redigoScripts(p), func() { p.Close() }, nil
	}

	libs := []Lib{goredisLib("goredis", openGoredis), goredisLib("goredis-autopipeline", openAuto), rueidisLib, redigoLib, valkeyLib}
	for i := range libs {
		libs[i].ServerConns = func() (ConnCount, func(), error) {
			opt := *gopt
			opt.PoolSize = 1
			c := goredislib.NewClient(&opt)
			return func(ctx context.Context) (Conns, error) {
				info, err := c.Info(ctx, "clients").Result()
				if err != nil {
					return Conns{}, err
				}
				all, err := connectedClients(info)
				if err != nil {
					return Conns{}, err
				}
				// No TYPE filter in go-redis: pubsubClients filters. miniredis has no CLIENT
				// LIST: its pub/sub count stays 0.
				list, _ := c.ClientList(ctx).Result()
				return Conns{All: all, PubSub: pubsubClients(list)}, nil
			}, func() { c.Close() }, nil
		}
	}
	return libs, nil
}

// clientLib is the Lib of our Client on a driver whose clients open makes, one a backend,
// floor or scripts floor, closed with it: backend makes the backend, floor and scripts the
// floors.
func clientLib[C interface{ Close() }](name string, open func() (C, error), backend func(C) locker.Locker, floor, scripts func(C) FloorOp) Lib {
	with := func(f func(C) FloorOp) func() (FloorOp, func(), error) {
		return func() (FloorOp, func(), error) {
			c, err := open()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			return f(c), c.Close, nil
		}
	}
	lib := Ours(name, name, func() (locker.Locker, func(), error) {
		c, err := open()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return backend(c), c.Close, nil
	}, with(floor))
	lib.ScriptFloor = with(scripts)
	return lib
}

// pubsubClients counts the connections in pub/sub mode (flag P) in the reply to CLIENT LIST.
func pubsubClients(list string) int {
	n := 0
	for line := range strings.Lines(list) {
		for field := range strings.FieldsSeq(line) {
			if flags, ok := strings.CutPrefix(field, "flags="); ok && strings.Contains(flags, "P") {
				n++
			}
		}
	}
	return n
}

// connectedClients returns the connected_clients field of the reply to INFO clients.
func connectedClients(info string) (int, error) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO clients: no connected_clients field")
}

// The scripts floor runs the canonical acquire and release scripts on one key with one owner,
// with the keys and arguments the backend sends for a plain Lock and Unlock (a fresh owner with
// request IDs, a 30s lease, the notice channel), through the driver's script object: the
// server's work for a Lock+Unlock, without the Client.
type scriptsArgs struct {
	acquireKeys, acquireArgs, releaseKeys, releaseArgs []string
}

func scriptsCall() scriptsArgs {
	key, owner := newKey("floor-scripts"), "0123456789abcdef0123456789abcdef"
	return scriptsArgs{
		acquireKeys: []string{key, rediscore.MarkerKey(key, "AAAAAAAAAAAAAAAA.1")},
		acquireArgs: []string{owner, "30000", "mn"},
		releaseKeys: []string{key, rediscore.MarkerKey(key, "AAAAAAAAAAAAAAAA.2")},
		releaseArgs: []string{owner, rediscore.Channel(key), "m"},
	}
}

// anys converts ss for drivers that take ...any.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func goredisScripts(c goredislib.Scripter) FloorOp {
	acquire := goredislib.NewScript(rediscore.AcquireScript.Source)
	release := goredislib.NewScript(rediscore.ReleaseScript.Source)
	a := scriptsCall()
	acquireArgs, releaseArgs := anys(a.acquireArgs), anys(a.releaseArgs)
	return func(ctx context.Context) error {
		if err := acquire.Run(ctx, c, a.acquireKeys, acquireArgs...).Err(); err != nil {
			return err
		}
		return release.Run(ctx, c, a.releaseKeys, releaseArgs...).Err()
	}
}

// scriptsFloor returns the scripts floor through script objects: newScript makes one of a
// source, exec runs one with keys and args.
func scriptsFloor[S any](newScript func(src string) S, exec func(ctx context.Context, s S, keys, args []string) error) FloorOp {
	acquire, release := newScript(rediscore.AcquireScript.Source), newScript(rediscore.ReleaseScript.Source)
	a := scriptsCall()
	return func(ctx context.Context) error {
		if err := exec(ctx, acquire, a.acquireKeys, a.acquireArgs); err != nil {
			return err
		}
		return exec(ctx, release, a.releaseKeys, a.releaseArgs)
	}
}

// luaFloor returns the raw floor through script objects (newScript and exec as for
// scriptsFloor): two calls of `return 1`.
func luaFloor[S any](newScript func(src string) S, exec func(ctx context.Context, s S, keys, args []string) error) FloorOp {
	s := newScript(floorScript)
	return func(ctx context.Context) error {
		for range 2 {
			if err := exec(ctx, s, nil, nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// rueidisLua makes rueidis Lua script objects and runs them on c (EVALSHA, EVAL on NOSCRIPT).
func rueidisLua(c rueidis.Client) (func(string) *rueidis.Lua, func(context.Context, *rueidis.Lua, []string, []string) error) {
	return func(src string) *rueidis.Lua { return rueidis.NewLuaScript(src) },
		func(ctx context.Context, s *rueidis.Lua, keys, args []string) error {
			return s.Exec(ctx, c, keys, args).Error()
		}
}

// valkeyLua makes valkey-go Lua script objects and runs them on c (EVALSHA, EVAL on NOSCRIPT).
func valkeyLua(c valkey.Client) (func(string) *valkey.Lua, func(context.Context, *valkey.Lua, []string, []string) error) {
	return func(src string) *valkey.Lua { return valkey.NewLuaScript(src) },
		func(ctx context.Context, s *valkey.Lua, keys, args []string) error {
			return s.Exec(ctx, c, keys, args).Error()
		}
}

func rueidisScripts(c rueidis.Client) FloorOp { return scriptsFloor(rueidisLua(c)) }
func valkeyScripts(c valkey.Client) FloorOp   { return scriptsFloor(valkeyLua(c)) }

func redigoScripts(p *redigolib.Pool) FloorOp {
	acquire := redigolib.NewScript(2, rediscore.AcquireScript.Source)
	release := redigolib.NewScript(2, rediscore.ReleaseScript.Source)
	a := scriptsCall()
	acquireArgs := anys(append(append([]string(nil), a.acquireKeys...), a.acquireArgs...))
	releaseArgs := anys(append(append([]string(nil), a.releaseKeys...), a.releaseArgs...))
	run := func(ctx context.Context, s *redigolib.Script, args []any) error {
		conn, err := p.GetContext(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = s.DoContext(ctx, conn, args...)
		return err
	}
	return func(ctx context.Context) error {
		if err := run(ctx, acquire, acquireArgs); err != nil {
			return err
		}
		return run(ctx, release, releaseArgs)
	}
}

// GoredisFloor returns the raw floor through go-redis: two Script.Run calls (EVALSHA, EVAL on
// NOSCRIPT) of `return 1` on c.
func GoredisFloor(c goredislib.Scripter) FloorOp {
	s := goredislib.NewScript(floorScript)
	return func(ctx context.Context) error {
		for range 2 {
			if err := s.Run(ctx, c, nil).Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

// RueidisFloor returns the raw floor through rueidis: two Lua.Exec calls (EVALSHA, EVAL on
// NOSCRIPT) of `return 1` on c.
func RueidisFloor(c rueidis.Client) FloorOp { return luaFloor(rueidisLua(c)) }

// valkeyFloor is RueidisFloor through valkey-go.
func valkeyFloor(c valkey.Client) FloorOp { return luaFloor(valkeyLua(c)) }

// redigoFloor returns the raw floor through Redigo: two Script.DoContext calls (EVALSHA) of
// `return 1`, each on a connection of the pool, as the backend runs its scripts.
func redigoFloor(p *redigolib.Pool) FloorOp {
	s := redigolib.NewScript(0, floorScript)
	return func(ctx context.Context) error {
		for range 2 {
			conn, err := p.GetContext(ctx)
			if err != nil {
				return err
			}
			_, err = s.DoContext(ctx, conn)
			conn.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// Quorum returns the Lib of our Client on a quorum (backend/quorum) of rueidis backends, one per
// server at urls, to compare with rueidis on one server: its floor is rueidis's on the first
// server.
func Quorum(urls []string, o RedisOptions) (Lib, error) {
	var opts []rueidis.ClientOption
	for _, url := range urls {
		_, opt, _, err := redisURL(url, o)
		if err != nil {
			return Lib{}, err
		}
		opts = append(opts, opt)
	}
	name := fmt.Sprintf("quorum-%d-rueidis", len(urls))
	return Ours(name, "rueidis",
		func() (locker.Locker, func(), error) {
			var (
				nodes   []locker.Locker
				clients []rueidis.Client
			)
			closeAll := func() {
				for _, c := range clients {
					c.Close()
				}
			}
			for _, opt := range opts {
				c, err := rueidis.NewClient(opt)
				if err != nil {
					closeAll()
					return nil, nil, fmt.Errorf("rueidis: %w", err)
				}
				clients = append(clients, c)
				nodes = append(nodes, rueidislocker.New(c))
			}
			return quorum.New(nodes...), closeAll, nil
		},
		func() (FloorOp, func(), error) {
			c, err := rueidis.NewClient(opts[0])
			if err != nil {
				return nil, nil, fmt.Errorf("rueidis: %w", err)
			}
			return RueidisFloor(c), c.Close, nil
		}), nil
}
