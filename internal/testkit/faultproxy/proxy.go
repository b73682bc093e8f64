package faultproxy

import (
	"context"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback listener to one target,
// injecting the faults currently switched on. Create it with Start; the zero
// value is not usable.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	ctx    context.Context // cancelled when the proxy closes (ends dials)
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every link's run

	mu       sync.Mutex
	closed   bool
	links    map[*link]struct{} // open connections
	accepted int
	dropped  int
	f        faults
}

// Start starts a proxy listening on 127.0.0.1 (a free port) that forwards
// every connection it accepts to target, a "host:port" whose host must be a
// loopback address or "localhost" (anything else fails the test). No fault is
// on at first.
//
// The target is dialled once per accepted connection; if that fails (the
// server is down) the accepted connection is reset. The proxy, its listener,
// every proxied connection and every goroutine are closed and ended in
// t.Cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatalf("faultproxy: target %q: %v", target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Fatalf("faultproxy: target %q is not on loopback", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{t: t, target: target, ln: ln, ctx: ctx, cancel: cancel, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's listening address, "127.0.0.1:port". Clients
// connect here instead of to the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Conns returns the number of proxied connections currently open: accepted
// and not yet closed by Reset, by a dropped reply or by their peers. A
// connection closed by Reset or by a drop leaves the count before either
// peer sees the reset; one closed by its peers leaves it shortly after both
// have closed their side (or one has aborted).
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Accepted returns the number of connections the proxy has accepted since it
// started, including those accepted during a black hole.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !p.isClosed() {
				p.t.Errorf("faultproxy: accept: %v", err)
			}
			return
		}
		l := p.adopt(c)
		if l == nil {
			return
		}
		go l.run()
	}
}

// adopt registers a new link for the accepted connection c, or closes c and
// returns nil when the proxy is closed.
func (p *Proxy) adopt(c net.Conn) *link {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return nil
	}
	p.accepted++
	l := newLink(p, c)
	p.links[l] = struct{}{}
	p.wg.Add(1) // while the accept loop's own count keeps the group above zero
	return l
}

// forget removes l from the open connections; it is idempotent.
func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// snapshot returns the open links.
func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// close stops accepting, closes every connection and waits for every
// goroutine to end.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	_ = p.ln.Close()
	for _, l := range p.snapshot() {
		l.shut(false)
	}
	p.wg.Wait()
}
