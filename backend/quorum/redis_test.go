package quorum_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/quorum"
	redigolocker "github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/backend/rediscore"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// dialer connects a driver to one server: a real address, or a miniredis's in-memory Dial.
type dialer struct {
	addr string
	dial func() (net.Conn, error) // nil: dial addr
}

// mixed returns a quorum of one node per driver — go-redis, rueidis, Redigo — on the three
// servers, every client closed with the case.
func mixed(t conformance.TB, servers [3]dialer) *quorum.Backend {
	ropt := &redis.Options{Addr: servers[0].addr, ContextTimeoutEnabled: true}
	if d := servers[0].dial; d != nil {
		ropt = &redis.Options{Addr: "127.0.0.1:0", Dialer: func(context.Context, string, string) (net.Conn, error) { return d() }}
	}
	rdb := redis.NewClient(ropt)
	t.Cleanup(func() { rdb.Close() })

	opt := rueidis.ClientOption{InitAddress: []string{servers[1].addr}}
	if d := servers[1].dial; d != nil {
		// miniredis has no CLIENT TRACKING, and answers CLUSTER SLOTS (rueidis then makes its
		// cluster client, whose Close leaves goroutines for up to a second).
		opt = rueidis.ClientOption{InitAddress: []string{"127.0.0.1:0"}, DisableCache: true,
			DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) { return d() }}
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(func() {
		rc.Close()
		if servers[1].dial != nil {
			time.Sleep(2 * time.Second) // in the bubble: instant
		}
	})

	pool := &redigo.Pool{MaxIdle: 4, DialContext: func(ctx context.Context) (redigo.Conn, error) {
		if d := servers[2].dial; d != nil {
			nc, err := d()
			if err != nil {
				return nil, err
			}
			return redigo.NewConn(nc, 0, 0), nil
		}
		return redigo.DialContext(ctx, "tcp", servers[2].addr)
	}}
	t.Cleanup(func() { pool.Close() })
	noLinger := rediscore.WithNoticeLinger(0) // no connection outlives a synctest bubble
	return quorum.New(goredis.New(rdb, noLinger), rueidislocker.New(rc, noLinger), redigolocker.New(pool, noLinger))
}

// The suite on a quorum of three miniredis servers, one per driver, in a synctest bubble.
func TestConformanceMiniredisMixed(t *testing.T) {
	var servers [3]dialer
	conformance.Run(t, conformance.Factory{
		Synctest: true,
		Foreign:  redistest.Foreign(onEach(&servers)),
		New: func(t conformance.TB) locker.Locker {
			for i := range servers {
				m := redistest.Miniredis(t)
				servers[i] = dialer{dial: m.Dial}
			}
			return mixed(t, servers)
		},
	})
}

// onEach returns a function that sends a command to each of the servers and returns their
// replies, for Factory.Foreign: a foreign value is on every node.
func onEach(servers *[3]dialer) func(args ...string) (any, error) {
	return func(args ...string) (any, error) {
		var replies []any
		for _, s := range servers {
			var (
				v   any
				err error
			)
			if s.dial != nil {
				v, err = redistest.DoDial(s.dial, args...)
			} else {
				v, err = redistest.Do(s.addr, 0, args...)
			}
			if err != nil {
				return nil, err
			}
			replies = append(replies, v)
		}
		return replies, nil
	}
}

// The suite on a quorum of three real redis-servers, one per driver, in real time. The quorum
// bounds each node's acquire by the lease (an answer after it is of no use), so the leases must
// stay well above the round trips of a machine loaded by parallel tests under -race: with the
// default 1s (the state machine's 50–250ms), two `go test -race -count=3 ./...` at once on two
// cores made node calls time out, and the quorum's answers, outvoted by the nodes that missed
// the call, inexact. 3s gives the state machine 150–750ms.
func TestConformanceRedisMixed(t *testing.T) {
	var servers [3]dialer
	for i := range servers {
		servers[i] = dialer{addr: redistest.StartServer(t).Addr}
	}
	conformance.Run(t, conformance.Factory{
		TTL:     3 * time.Second,
		New:     func(t conformance.TB) locker.Locker { return mixed(t, servers) },
		Foreign: redistest.Foreign(onEach(&servers)),
	})
}
