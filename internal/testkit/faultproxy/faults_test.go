package faultproxy

import (
	"testing"
	"time"
)

func TestLatency(t *testing.T) {
	const d = 100 * time.Millisecond
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	c := dial(t, p.Addr())
	c.roundTrip(t, "before") // connected before the latency is set

	p.SetLatency(d)
	start := time.Now()
	c.roundTrip(t, "slow")
	if rt := time.Since(start); rt < 2*d {
		t.Errorf("round trip took %v, want at least %v (%v each way)", rt, 2*d, d)
	}

	// Order is kept, and chunks wait out their delays together rather than
	// one after another: three writes d/5 apart (the pause only keeps them
	// separate chunks) are answered in order after about 2d + 2d/5.
	start = time.Now()
	for i, line := range []string{"1", "2", "3"} {
		if i > 0 {
			time.Sleep(d / 5)
		}
		c.send(t, line)
	}
	for _, line := range []string{"1", "2", "3"} {
		if got, err := c.recv(patience); err != nil || got != "ok "+line {
			t.Fatalf("got %q, %v; want %q", got, err, "ok "+line)
		}
	}
	if rt := time.Since(start); rt < 2*d || rt >= 7*d/2 {
		t.Errorf("three round trips took %v, want between %v and %v (one delay after another would take over %v)", rt, 2*d, 7*d/2, 4*d)
	}

	// A new connection gets the latency too.
	c2 := dial(t, p.Addr())
	start = time.Now()
	c2.roundTrip(t, "new")
	if rt := time.Since(start); rt < 2*d {
		t.Errorf("new connection's round trip took %v, want at least %v", rt, 2*d)
	}

	p.Heal()
	start = time.Now()
	c.roundTrip(t, "healed")
	if rt := time.Since(start); rt >= d {
		t.Errorf("round trip after Heal took %v, want under %v", rt, d)
	}
}

func TestBlackhole(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	c := dial(t, p.Addr())
	c.roundTrip(t, "before")
	s.next(t)

	p.Blackhole()
	c.send(t, "lost")
	s.none(t)
	if got, err := c.recv(quiet); err == nil {
		t.Fatalf("client got %q during the black hole", got)
	}
	c2 := dial(t, p.Addr()) // accepted, but black-holed too
	c2.send(t, "also lost")
	s.none(t)
	if n, a := p.Conns(), p.Accepted(); n != 2 || a != 2 {
		t.Errorf("Conns(), Accepted() = %d, %d; want 2, 2", n, a)
	}

	p.Heal()
	for _, cl := range []*client{c, c2} {
		cl.roundTrip(t, "after")
		if got := s.next(t); got != "after" {
			t.Fatalf("server got %q, want %q (bytes from the black hole must stay lost)", got, "after")
		}
	}
}

// TestBlackholeSwallowsReplies checks the server-to-client direction: a
// reply the server sends during the black hole never arrives.
func TestBlackholeSwallowsReplies(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	c := dial(t, p.Addr())
	// The reply waits out the latency inside the proxy, so the black hole,
	// started as soon as the server has the command, catches it.
	p.SetLatency(quiet / 2)
	c.send(t, "cmd")
	s.next(t) // sent up before the black hole started
	p.Blackhole()
	if got, err := c.recv(quiet); err == nil {
		t.Fatalf("client got %q during the black hole", got)
	}
	p.Heal()
	c.roundTrip(t, "after")
}

func TestReset(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	c := dial(t, p.Addr())
	c.roundTrip(t, "before")

	p.Reset()
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns() = %d after Reset, want 0", n)
	}
	c.broken(t)
	select {
	case <-s.ended:
	case <-time.After(patience):
		t.Fatal("the server side was not closed")
	}

	c2 := dial(t, p.Addr())
	c2.roundTrip(t, "after")
}

func TestDropReplies(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	p.DropReplies(1)
	c := dial(t, p.Addr())
	c.send(t, "SET k v")
	if got := s.next(t); got != "SET k v" {
		t.Fatalf("server got %q, want the command", got)
	}
	c.broken(t)
	if n := p.Dropped(); n != 1 {
		t.Errorf("Dropped() = %d, want 1", n)
	}

	// One drop only: the next command, on a new connection, is answered.
	c2 := dial(t, p.Addr())
	c2.roundTrip(t, "GET k")
	c2.roundTrip(t, "GET k")
	if n := p.Dropped(); n != 1 {
		t.Errorf("Dropped() = %d after more commands, want 1", n)
	}
}

func TestDropRepliesTo(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	p.DropRepliesTo("EVALSHA", 1)
	c := dial(t, p.Addr())
	c.roundTrip(t, "HELLO 3") // does not match: forwarded normally
	c.roundTrip(t, "PING")
	c.send(t, "EVALSHA 1234 1 key")
	s.next(t)
	s.next(t)
	if got := s.next(t); got != "EVALSHA 1234 1 key" {
		t.Fatalf("server got %q, want the EVALSHA", got)
	}
	c.broken(t)
	if n := p.Dropped(); n != 1 {
		t.Errorf("Dropped() = %d, want 1", n)
	}

	c2 := dial(t, p.Addr())
	c2.roundTrip(t, "EVALSHA 1234 1 key") // the one drop is used up
}

// TestDropWhenServerHangsUp: a server that closes the connection instead of
// answering ends the wait for the reply at once, and the client is reset,
// not sent the server's EOF.
func TestDropWhenServerHangsUp(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	p.DropReplies(1)
	c := dial(t, p.Addr())
	start := time.Now()
	c.send(t, "QUIT")
	s.next(t)
	c.broken(t)
	if n := p.Dropped(); n != 1 {
		t.Errorf("Dropped() = %d, want 1", n)
	}
	if d := time.Since(start); d >= replyWait {
		t.Errorf("the drop took %v, want it to end with the server's close", d)
	}
}

func TestDropRepliesCancelled(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	c := dial(t, p.Addr())
	p.DropReplies(3)
	p.DropReplies(0)
	c.roundTrip(t, "a")
	p.DropRepliesTo("b", 1)
	p.Heal()
	c.roundTrip(t, "b")
	if n := p.Dropped(); n != 0 {
		t.Errorf("Dropped() = %d, want 0", n)
	}
}
