package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/quorum"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// realQuorum starts three redis-servers and returns them with a quorum of go-redis backends on
// them, whose calls fail fast on a dead server.
func realQuorum(t *testing.T) ([]*redistest.Server, *quorum.Backend) {
	var (
		servers []*redistest.Server
		nodes   []locker.Locker
	)
	for range 3 {
		srv := redistest.StartServer(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { rdb.Close() })
		servers = append(servers, srv)
		nodes = append(nodes, goredis.New(rdb))
	}
	return servers, quorum.NewConfig(quorum.Config{Nodes: nodes, NodeTimeout: 300 * time.Millisecond})
}

func exists(t *testing.T, srv *redistest.Server, key string) bool {
	t.Helper()
	return srv.Do(t, "EXISTS", key) != int64(0)
}

// Real servers killed (kill -9): with one of three down, locks work; with two down, Lock fails
// within its ctx and leaves nothing held on the survivor; a server restarted empty does not let
// another owner in while the holder keeps its lease.
func TestKilledServers(t *testing.T) {
	servers, b := realQuorum(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, other := locker.New(b, locker.WithTTL(time.Second)), locker.New(b, locker.WithTTL(time.Second))
	defer c.Close()
	defer other.Close()

	servers[2].Stop()
	l, err := c.Lock(ctx, "one-down")
	if err != nil {
		t.Fatalf("Lock with one server of three killed: %v", err)
	}
	if _, err := other.TryLock(ctx, "one-down"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("another owner with one server killed: %v, want ErrNotObtained", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock with one server killed: %v", err)
	}

	servers[1].Stop()
	short, stop := context.WithTimeout(ctx, 700*time.Millisecond)
	defer stop()
	start := time.Now()
	if _, err := c.Lock(short, "two-down"); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with two servers of three killed = %v, want it to fail with its ctx", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("Lock took %v for a ctx of 700ms", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for exists(t, servers[0], "two-down") {
		if time.Now().After(deadline) {
			t.Fatal("the surviving server still holds the key: a partial acquire was left behind")
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded: the take-back runs in the background
	}

	servers[1].Restart(t)
	servers[2].Restart(t)
	held, err := c.Lock(ctx, "restarted")
	if err != nil {
		t.Fatalf("Lock after the servers came back: %v", err)
	}
	servers[1].Restart(t) // empty: no persistence
	if exists(t, servers[1], "restarted") {
		t.Fatal("the restarted server kept its data")
	}
	if _, err := other.TryLock(ctx, "restarted"); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("another owner after a server restarted empty: %v, want ErrNotObtained", err)
	}
	time.Sleep(1500 * time.Millisecond) // longer than the TTL: only renewals keep the lease
	if err := context.Cause(held.Context()); err != nil {
		t.Fatalf("the holder's lease ended after one server restarted empty: %v", err)
	}
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
}
