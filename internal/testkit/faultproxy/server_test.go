package faultproxy

import (
	"bufio"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// patience bounds every wait for something that must happen; quiet is how
// long a test watches for something that must not.
const (
	patience = 2 * time.Second
	quiet    = 200 * time.Millisecond
)

// lineServer is a line-protocol server for the tests: it records every line
// it receives and, unless silent, answers each with "ok <line>\n". The line
// "QUIT" is recorded, not answered, and closes the connection.
type lineServer struct {
	addr  string
	lines chan string   // every line received, in order
	ended chan struct{} // one value per connection that ended
}

func startLineServer(t *testing.T, silent bool) *lineServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{addr: ln.Addr().String(), lines: make(chan string, 100), ended: make(chan struct{}, 100)}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c, silent)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

func (s *lineServer) serve(c net.Conn, silent bool) {
	defer func() {
		_ = c.Close()
		select {
		case s.ended <- struct{}{}:
		default:
		}
	}()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		select {
		case s.lines <- sc.Text():
		default:
			return // a test sent more lines than it reads
		}
		if sc.Text() == "QUIT" {
			return
		}
		if !silent {
			if _, err := c.Write([]byte("ok " + sc.Text() + "\n")); err != nil {
				return
			}
		}
	}
}

// next returns the next line the server received.
func (s *lineServer) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-s.lines:
		return l
	case <-time.After(patience):
		t.Fatal("server received no line")
		return ""
	}
}

// none checks that the server receives no line for a while.
func (s *lineServer) none(t *testing.T) {
	t.Helper()
	select {
	case l := <-s.lines:
		t.Fatalf("server received %q, want nothing", l)
	case <-time.After(quiet):
	}
}

// client is a connection to the proxy, with a line reader.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{Conn: c, r: bufio.NewReader(c)}
}

func (c *client) send(t *testing.T, line string) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("send %q: %v", line, err)
	}
}

// recv reads one line, waiting at most d.
func (c *client) recv(d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// roundTrip sends line and checks the server's answer.
func (c *client) roundTrip(t *testing.T, line string) {
	t.Helper()
	c.send(t, line)
	got, err := c.recv(patience)
	if err != nil || got != "ok "+line {
		t.Fatalf("reply to %q: %q, %v; want %q", line, got, err, "ok "+line)
	}
}

// broken checks that the connection fails (not merely times out) with no
// byte read.
func (c *client) broken(t *testing.T) {
	t.Helper()
	got, err := c.recv(patience)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || got != "" {
		t.Fatalf("read %q, %v; want no bytes and a connection error", got, err)
	}
}

// recorder is a testing.TB whose Fatalf is recorded (and ends the calling
// goroutine, like the real one) instead of failing the test.
type recorder struct {
	testing.TB
	fatal bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(string, ...any) {
	r.fatal = true
	runtime.Goexit()
}
