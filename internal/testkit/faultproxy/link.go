package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the dial to the target for one accepted connection.
const dialTimeout = 5 * time.Second

// link is one proxied connection: the client's socket, accepted by the
// proxy, and the server's, dialled to the target.
type link struct {
	p      *Proxy
	client net.Conn
	done   chan struct{} // closed by shut

	dropping  atomic.Bool   // a reply is being dropped: throw away server bytes
	replied   chan struct{} // closed when the first dropped reply byte arrives
	replyOnce sync.Once

	mu     sync.Mutex
	server net.Conn // nil until dialled
	closed bool
}

func newLink(p *Proxy, client net.Conn) *link {
	return &link{p: p, client: client, done: make(chan struct{}), replied: make(chan struct{})}
}

// run dials the target, then forwards both directions until both have ended
// (EOF each way) or the link is shut. It is the link's only goroutine until
// the dial succeeds; the proxy's wait group counts it.
func (l *link) run() {
	defer l.p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(l.p.ctx, "tcp", l.p.target)
	if err != nil {
		if l.p.ctx.Err() == nil {
			l.p.t.Logf("faultproxy: dial %s: %v (client connection reset)", l.p.target, err)
		}
		l.shut(true)
		return
	}
	if !l.attach(server) {
		_ = server.Close()
		return
	}
	var wg sync.WaitGroup
	l.pipe(&wg, l.client, server, true)
	l.pipe(&wg, server, l.client, false)
	wg.Wait()
	l.shut(false)
}

// attach records the server socket, or reports false when the link was shut
// during the dial.
func (l *link) attach(server net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.server = server
	return true
}

// shut closes both sockets, aborting them (SO_LINGER 0, so the peers see an
// RST) when abort is set, ends the link's goroutines' waits and removes it
// from the proxy's open connections. Only the first call does anything.
func (l *link) shut(abort bool) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	conns := []net.Conn{l.client, l.server}
	l.mu.Unlock()
	l.p.forget(l) // first, so Conns is down before either peer notices
	close(l.done)
	for _, c := range conns {
		if c == nil {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok && abort {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// gotReply notes that the server answered the command whose reply is being
// dropped.
func (l *link) gotReply() {
	l.replyOnce.Do(func() { close(l.replied) })
}
