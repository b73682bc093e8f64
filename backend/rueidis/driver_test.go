package rueidislocker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/redislock"
	"github.com/hashlock/locker/internal/redistest"
)

// testServer is miniredis behind a rueidis client, in the current synctest bubble, with a way
// to break every connection the client made.
type testServer struct {
	m *miniredis.Miniredis
	c rueidis.Client

	mu    sync.Mutex
	conns []net.Conn
}

func newTestServer(t conformance.TB) *testServer {
	s := &testServer{m: redistest.Miniredis(t)}
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{"127.0.0.1:0"},
		DisableCache: true,
		DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
			conn, err := s.m.Dial()
			if err == nil {
				s.mu.Lock()
				s.conns = append(s.conns, conn)
				s.mu.Unlock()
			}
			return conn, err
		},
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	s.c = c
	t.Cleanup(func() {
		c.Close()
		// The cluster client's Close closes its connections in goroutines and returns; a
		// connection that breaks first (miniredis closing) schedules a topology refresh after a
		// random delay of up to 1s. Let the bubble's clock run past both, so that no goroutine
		// outlives the case.
		time.Sleep(2 * time.Second)
	})
	return s
}

// breakConns closes every connection made so far, as a network failure would.
func (s *testServer) breakConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

func TestClusterMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		d := newDriver(s.c)
		// miniredis answers CLUSTER SLOTS, so rueidis.NewClient makes its cluster client.
		t.Logf("rueidis mode against miniredis: %s", s.c.Mode())
		if got, want := d.Cluster(), s.c.Mode() == rueidis.ClientModeCluster; got != want {
			t.Fatalf("Cluster() = %v with a %s client", got, s.c.Mode())
		}
	})
}

// After SCRIPT FLUSH, EVALSHA gets NOSCRIPT: both paths must fall back.
func TestNoScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		d := newDriver(s.c)
		ctx := t.Context()
		flush := func() {
			t.Helper()
			if err := s.c.Do(ctx, s.c.B().ScriptFlush().Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		flush()
		r, err := d.Eval(ctx, redislock.AcquireScript, []string{"a"}, []string{"o", "1000", ""})
		if err != nil || len(r.Array) != 2 || r.Array[0] != 1 {
			t.Fatalf("Eval after SCRIPT FLUSH: %+v, %v; want 1 hold", r, err)
		}
		if _, err := d.Eval(ctx, redislock.AcquireScript, []string{"b"}, []string{"o", "1000", ""}); err != nil {
			t.Fatal(err)
		}
		flush()
		res := d.EvalBatch(ctx, redislock.RenewScript, []redislock.Call{
			{Keys: []string{"a"}, Args: []string{"o", "2000"}},
			{Keys: []string{"b"}, Args: []string{"x", "2000"}},
		})
		if len(res) != 2 || res[0].Err != nil || res[1].Err != nil ||
			len(res[0].Reply.Array) != 1 || res[0].Reply.Array[0] != 1 ||
			len(res[1].Reply.Array) != 1 || res[1].Reply.Array[0] != 0 {
			t.Fatalf("EvalBatch after SCRIPT FLUSH: %+v; want [1] and [0]", res)
		}
		if ttl := s.m.TTL("a"); ttl != 2*time.Second {
			t.Fatalf("TTL of a after renewal: %v, want 2s", ttl)
		}
	})
}

func TestSubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		d := newDriver(s.c)
		ctx := t.Context()
		const channel = "{k}:locker:released"

		// miniredis has no SSUBSCRIBE.
		if _, err := d.Subscribe(ctx, channel, true, func() {}, func() {}); !errors.Is(err, redislock.ErrUnsupported) {
			t.Fatalf("sharded Subscribe on miniredis: %v, want ErrUnsupported", err)
		}

		notices, lost := make(chan struct{}, 16), make(chan struct{}, 16)
		stop, err := d.Subscribe(ctx, channel, false, func() { notices <- struct{}{} }, func() { lost <- struct{}{} })
		if err != nil {
			t.Fatal(err)
		}
		if err := s.c.Do(ctx, s.c.B().Publish().Channel(channel).Message("k").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-notices:
		case <-time.After(time.Minute):
			t.Fatal("no notice for a PUBLISH")
		}

		s.breakConns()
		select {
		case <-lost:
		case <-time.After(time.Minute):
			t.Fatal("a broken subscription connection was not reported lost")
		}

		synctest.Wait()
		before := s.m.CurrentConnectionCount()
		stop()
		synctest.Wait()
		if after := s.m.CurrentConnectionCount(); after > before {
			t.Fatalf("connections: %d before stop, %d after", before, after)
		}
		if len(notices)+len(lost) != 0 {
			t.Fatal("unexpected calls after the subscription ended")
		}
	})
}

// On a real 3-master cluster: after SCRIPT FLUSH on every node, a batch whose calls go to
// several nodes falls back and loads the script where it is missing.
func TestNoScriptCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	d := newDriver(c)
	if !d.Cluster() {
		t.Fatalf("Cluster() = false with a %s client", c.Mode())
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	keys := []string{"a", "b", "c", "d", "e", "f"} // slots on all three masters
	var calls []redislock.Call
	for _, k := range keys {
		if _, err := d.Eval(ctx, redislock.AcquireScript, []string{k}, []string{"o", "10000", ""}); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, redislock.Call{Keys: []string{k}, Args: []string{"o", "20000"}})
	}
	for _, n := range cluster.Nodes {
		n.Do(t, "SCRIPT", "FLUSH")
	}
	for i, r := range d.EvalBatch(ctx, redislock.RenewScript, calls) {
		if r.Err != nil || len(r.Reply.Array) != 1 || r.Reply.Array[0] != 1 {
			t.Fatalf("renewal of %s after SCRIPT FLUSH: %+v", keys[i], r)
		}
	}
}
