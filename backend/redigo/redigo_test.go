package redigo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/redigo"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// newMiniredis returns a miniredis on the bubble's clock and a pool of in-memory connections to
// it, both closed at the end of the test.
func newMiniredis(t conformance.TB) (*miniredis.Miniredis, *redis.Pool) {
	m := redistest.Miniredis(t)
	p := &redis.Pool{
		MaxIdle: 4,
		DialContext: func(context.Context) (redis.Conn, error) {
			nc, err := m.Dial()
			if err != nil {
				return nil, err
			}
			return redis.NewConn(nc, 0, 0), nil
		},
	}
	t.Cleanup(func() { p.Close() })
	return m, p
}

// After SCRIPT FLUSH, single calls fall back to EVAL and a renewal pipeline loads the script and
// runs again.
func TestNoScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, p := newMiniredis(t)
		b := redigo.New(p)
		ctx := t.Context()
		flush := func() {
			t.Helper()
			c := p.Get()
			defer c.Close()
			if _, err := c.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatalf("SCRIPT FLUSH: %v", err)
			}
		}

		if a, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}); err != nil || a.Holds != 1 {
			t.Fatalf("Acquire = %+v, %v; want 1 hold", a, err)
		}
		flush()
		if a, err := b.Acquire(ctx, locker.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}); err != nil || a.Holds != 2 {
			t.Fatalf("Acquire after SCRIPT FLUSH = %+v, %v; want 2 holds", a, err)
		}
		flush()
		batch := []locker.Renewal{{Key: "k", Owner: "o", TTL: 5 * time.Second}, {Key: "free", Owner: "o", TTL: time.Second}}
		errs := b.Renew(ctx, batch)
		if errs[0] != nil || errs[1] == nil {
			t.Fatalf("Renew after SCRIPT FLUSH = %v; want [nil, not held]", errs)
		}
		if s, err := b.Inspect(ctx, "k"); err != nil || s.TTL != 5*time.Second {
			t.Fatalf("Inspect = %+v, %v; want TTL 5s", s, err)
		}
	})
}

// A subscription whose connection breaks wakes its waiters; while the server stays away the
// Backend keeps trying to subscribe again, and cancel ends that.
func TestSubscriptionBroken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p := newMiniredis(t)
		b := redigo.New(p)
		notices, cancel, err := b.Subscribe(t.Context(), "k")
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		synctest.Wait()
		select {
		case <-notices:
			t.Fatal("notice before anything happened")
		default:
		}
		m.Close() // closes every connection, the subscriber's included
		synctest.Wait()
		select {
		case <-notices:
		default:
			t.Fatal("no notice after the subscription's connection broke")
		}
		cancel()
	})
}
