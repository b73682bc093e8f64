package faultproxy

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
)

func TestForwarding(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	c := dial(t, p.Addr())
	for _, line := range []string{"PING", "SET k v", "GET k"} {
		c.roundTrip(t, line)
		if got := s.next(t); got != line {
			t.Fatalf("server got %q, want %q", got, line)
		}
	}
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns() = %d, want 1", n)
	}
	c2 := dial(t, p.Addr())
	c2.roundTrip(t, "second")
	if n, a := p.Conns(), p.Accepted(); n != 2 || a != 2 {
		t.Errorf("Conns(), Accepted() = %d, %d; want 2, 2", n, a)
	}

	// A client's close reaches the server, and the connection leaves Conns.
	_ = c.Close()
	select {
	case <-s.ended:
	case <-time.After(patience):
		t.Fatal("server did not see the client's close")
	}
	deadline := time.Now().Add(patience)
	for p.Conns() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Conns() = %d after a close, want 1", p.Conns())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestManyConcurrentClients(t *testing.T) {
	s := startLineServer(t, false)
	p := Start(t, s.addr)
	p.SetLatency(5 * time.Millisecond)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			cl := &client{Conn: c, r: bufio.NewReader(c)}
			for j := range 5 {
				line := string(rune('a'+i)) + string(rune('0'+j))
				if _, err := c.Write([]byte(line + "\n")); err != nil {
					errs <- err
					return
				}
				got, err := cl.recv(patience)
				if err == nil && got != "ok "+line {
					err = fmt.Errorf("got %q, want %q", got, "ok "+line)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if a := p.Accepted(); a != n {
		t.Errorf("Accepted() = %d, want %d", a, n)
	}
}

func TestTargetMustBeLoopback(t *testing.T) {
	for _, target := range []string{"10.0.0.1:6379", "example.com:6379", "nonsense"} {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() { // Fatalf ends this goroutine through runtime.Goexit
			defer close(done)
			Start(r, target)
		}()
		<-done
		if !r.fatal {
			t.Errorf("Start(%q) did not fail", target)
		}
	}
}

// TestCloseEndsEverything closes a proxy whose goroutines are waiting in
// every possible place: on a long latency, in a black hole, on a reply
// being dropped that never comes, and in a half-open connection. Cleanup
// must not wait for any of them.
func TestCloseEndsEverything(t *testing.T) {
	var addr string
	var clients []*client
	t.Cleanup(func() {
		for _, c := range clients {
			_ = c.Close()
		}
	})
	// dial connects to the proxy without closing the connection at the end
	// of the subtest, so what the client sees after it is the proxy's doing.
	dial := func(t *testing.T, addr string) *client {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{Conn: c, r: bufio.NewReader(c)}
		clients = append(clients, cl)
		return cl
	}
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	t.Run("proxy", func(t *testing.T) {
		loud := startLineServer(t, false)
		silent := startLineServer(t, true)
		p := Start(t, loud.addr)
		q := Start(t, silent.addr)
		addr = p.Addr()

		slow := dial(t, p.Addr())
		slow.roundTrip(t, "warm")
		p.SetLatency(time.Hour)
		slow.send(t, "late")

		q.DropReplies(1)
		drop := dial(t, q.Addr())
		drop.send(t, "never answered")
		silent.next(t)

		q.Blackhole()
		hole := dial(t, q.Addr())
		hole.send(t, "lost")

		half := dial(t, q.Addr())
		_ = half.Conn.(*net.TCPConn).CloseWrite()
	})
	if d := time.Since(start); d > time.Second {
		t.Errorf("closing took %v, want well under the 2s reply wait", d)
	}
	for i, c := range clients {
		if _, err := c.recv(patience); err == nil {
			t.Errorf("client %d still connected after the proxy closed", i)
		}
	}
	if c, err := net.DialTimeout("tcp", addr, patience); err == nil {
		_ = c.Close()
		t.Error("the proxy still accepts connections after closing")
	}
	// Cleanup waited for every goroutine to return; give them a moment to
	// finish exiting.
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after closing, %d before", runtime.NumGoroutine(), goroutines)
		}
		time.Sleep(time.Millisecond)
	}
}
