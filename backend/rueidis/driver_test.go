package rueidislocker

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/redistest"
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
		r, err := d.Eval(ctx, rediscore.AcquireScript, []string{"a"}, []string{"o", "1000", ""})
		if err != nil || r.Array != nil || r.Int != 1 {
			t.Fatalf("Eval after SCRIPT FLUSH: %+v, %v; want 1 hold (a bare integer: no fencing)", r, err)
		}
		if _, err := d.Eval(ctx, rediscore.AcquireScript, []string{"b"}, []string{"o", "1000", ""}); err != nil {
			t.Fatal(err)
		}
		flush()
		res := d.EvalBatch(ctx, rediscore.RenewScript, []rediscore.Call{
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

// events records what a pub/sub connection reports.
type events struct{ messages, replies, failures chan string }

func newEvents() *events {
	return &events{make(chan string, 16), make(chan string, 16), make(chan string, 16)}
}
func (e *events) Message(channel, _ string)  { e.messages <- channel }
func (e *events) Reply(kind, channel string) { e.replies <- kind + " " + channel }
func (e *events) Failed(err error)           { e.failures <- err.Error() }

// receive returns the next value of ch, failing after a (fake) minute.
func receive(t *testing.T, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s", what)
		return ""
	}
}

func TestPubSub(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		d := newDriver(s.c)
		ctx := t.Context()
		const channel = "{k}:locker:released"

		if node, err := d.PubSubNode(ctx, channel, false); err != nil || node != "" {
			t.Fatalf("PubSubNode unsharded = %q, %v; want any node", node, err)
		}
		// miniredis has no SSUBSCRIBE.
		e := newEvents()
		pc, err := d.DialPubSub(ctx, "", e)
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.Do(ctx, rediscore.PubSubCommand{Name: "SSUBSCRIBE", Channels: []string{channel}}); !rediscore.IsUnknownCommand(err) {
			t.Fatalf("SSUBSCRIBE on miniredis: %v, want unknown command", err)
		}
		pc.Close()

		e = newEvents()
		pc, err = d.DialPubSub(ctx, "", e)
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.Do(ctx, rediscore.PubSubCommand{Name: "SUBSCRIBE", Channels: []string{channel, "other"}}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"subscribe " + channel, "subscribe other"} {
			if got := receive(t, e.replies, want); got != want {
				t.Fatalf("reply %q, want %q", got, want)
			}
		}
		if err := s.c.Do(ctx, s.c.B().Publish().Channel(channel).Message("k").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, e.messages, "notice for a PUBLISH"); got != channel {
			t.Fatalf("message on %q, want %q", got, channel)
		}
		if err := pc.Do(ctx, rediscore.PubSubCommand{Name: "UNSUBSCRIBE", Channels: []string{"other"}}); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, e.replies, "unsubscribe reply"); got != "unsubscribe other" {
			t.Fatalf("reply %q, want unsubscribe other", got)
		}

		s.breakConns()
		receive(t, e.failures, "report of the broken connection")

		synctest.Wait()
		before := s.m.CurrentConnectionCount()
		pc.Close()
		synctest.Wait()
		if after := s.m.CurrentConnectionCount(); after > before {
			t.Fatalf("connections: %d before Close, %d after", before, after)
		}
		if len(e.messages)+len(e.replies)+len(e.failures) != 0 {
			t.Fatal("unexpected events after the connection ended")
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
	var calls []rediscore.Call
	for _, k := range keys {
		if _, err := d.Eval(ctx, rediscore.AcquireScript, []string{k}, []string{"o", "10000", ""}); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, rediscore.Call{Keys: []string{k}, Args: []string{"o", "20000"}})
	}
	for _, n := range cluster.Nodes {
		n.Do(t, "SCRIPT", "FLUSH")
	}
	for i, r := range d.EvalBatch(ctx, rediscore.RenewScript, calls) {
		if r.Err != nil || len(r.Reply.Array) != 1 || r.Reply.Array[0] != 1 {
			t.Fatalf("renewal of %s after SCRIPT FLUSH: %+v", keys[i], r)
		}
	}
}
