package bench_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// TestMarkersLeft reports the keys and bytes that 10,000 Lock+Unlock leave on a redis-server
// (go-redis, default options), right after the loop and again after the window of an Unlock's
// marker (WithUnlockTimeout, default 5 s) has passed: the numbers of bench/README.md, "Markers".
// It is a measurement, not a test, and runs only with LOCKER_MARKERS=1:
//
//	LOCKER_MARKERS=1 go test -run '^TestMarkersLeft$' -v ./bench/
func TestMarkersLeft(t *testing.T) {
	if os.Getenv("LOCKER_MARKERS") != "1" {
		t.Skip("a measurement: set LOCKER_MARKERS=1")
	}
	const n = 10_000
	after := 6 * time.Second // longer than DefaultUnlockTimeout
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	c := locker.New(goredis.New(rdb))
	defer c.Close()
	ctx := t.Context()
	scenarios := []struct {
		name string
		run  func(i int) error
	}{
		{"Lock+Unlock on one key", func(int) error {
			l, err := c.Lock(ctx, "one")
			if err != nil {
				return err
			}
			return l.Unlock()
		}},
		{"Lock+Unlock on distinct keys", func(i int) error {
			l, err := c.Lock(ctx, "distinct:"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			return l.Unlock()
		}},
		{"Lock, re-entry, 2 × Unlock", func(int) error {
			l, err := c.Lock(ctx, "reentered")
			if err != nil {
				return err
			}
			inner, err := c.Lock(l.Context(), "reentered")
			if err != nil {
				return err
			}
			if err := inner.Unlock(); err != nil {
				return err
			}
			return l.Unlock()
		}},
	}
	for _, s := range scenarios {
		srv.Do(t, "FLUSHALL")
		base := usedMemory(t, srv)
		start := time.Now()
		for i := range n {
			if err := s.run(i); err != nil {
				t.Fatalf("%s, call %d: %v", s.name, i, err)
			}
		}
		t.Logf("%s, %d times in %v:", s.name, n, time.Since(start).Round(time.Millisecond))
		t.Logf("  right after: %s", leftOn(t, srv, rdb, base))
		time.Sleep(after) // a measurement once the last marker's window has passed, not a synchronisation
		t.Logf("  %v after the loop: %s", after, leftOn(t, srv, rdb, base))
	}
}

// leftOn describes the keys of srv: DBSIZE (expired keys not yet reclaimed included), the keys
// SCAN finds (expired ones excluded) and the sum of their MEMORY USAGE (one pipeline per SCAN
// batch, so that few expire meanwhile), and used_memory less base.
func leftOn(t *testing.T, srv *redistest.Server, rdb *redis.Client, base int64) string {
	ctx := t.Context()
	dbsize := rdb.DBSize(ctx).Val()
	var keys, bytes int64
	var cursor uint64
	for {
		batch, next, err := rdb.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.MemoryUsage(ctx, k)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if size, err := c.(*redis.IntCmd).Result(); err == nil {
				keys++
				bytes += size
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return fmt.Sprintf("%d keys by SCAN (DBSIZE %d), MEMORY USAGE %d B, used_memory %+d B", keys, dbsize, bytes, usedMemory(t, srv)-base)
}

// usedMemory returns INFO memory's used_memory.
func usedMemory(t *testing.T, srv *redistest.Server) int64 {
	info, _ := srv.Do(t, "INFO", "memory").(string)
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO memory without used_memory: %q", info)
	return 0
}
