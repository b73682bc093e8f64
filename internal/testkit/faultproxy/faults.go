package faultproxy

import (
	"bytes"
	"time"
)

// replyWait bounds how long a dropped reply is waited for (see DropRepliesTo).
const replyWait = 2 * time.Second

// faults is the set of faults switched on; the zero value is none.
type faults struct {
	latency   time.Duration
	blackhole bool
	dropLeft  int    // replies still to drop
	dropMatch []byte // a chunk must contain this to have its reply dropped
}

// SetLatency delays every chunk forwarded in either direction by d, counted
// from when the proxy read it, on open and new connections. Order is kept
// within each direction, and a delay in one direction never holds up the
// other. It applies to chunks read after the call; chunks already waiting
// keep their delay. d <= 0 means no latency, the default.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f.latency = max(d, 0)
}

// Blackhole starts a black hole: until Heal, every byte due to be forwarded,
// in either direction and on every connection, is read and thrown away.
// Connections stay open and new ones are accepted (and dialled through to the
// target) but black-holed too. A half-close (FIN) met during a black hole is
// thrown away as well. A chunk's fate is decided when it is due, after its
// latency: one read before the black hole but due during it is lost, one
// read during it but due after Heal is forwarded. Off by default.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f.blackhole = true
}

// Heal ends every fault: the black hole, the latency and any reply drops not
// yet started (a drop already waiting for its reply still resets its
// connection). Connections still open resume forwarding; bytes thrown away
// during the black hole stay lost. Connections already closed stay closed.
// Dropped keeps its count.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f = faults{}
}

// Reset aborts every connection open now: both the client's and the
// target's socket are closed with SO_LINGER 0, so each peer sees a TCP RST
// (ECONNRESET) or EOF. Conns no longer counts them when Reset returns. It
// does not change the faults, and new connections are forwarded as usual.
func (p *Proxy) Reset() {
	for _, l := range p.snapshot() {
		l.shut(true)
	}
}

// DropReplies is DropRepliesTo("", n): it drops the replies to the next n
// client chunks forwarded, whatever they contain.
func (p *Proxy) DropReplies(n int) { p.DropRepliesTo("", n) }

// DropRepliesTo drops the replies to the next n chunks sent by clients (on any connection) that
// contain substr ("" matches every chunk); it replaces any earlier setting, and n <= 0 or Heal
// cancels it. Default: no drops. The proxy forwards each such chunk, so the server runs the
// command, waits (at most 2 seconds) for the first bytes of the reply or the server's close,
// throws away everything the server sends from then on, and resets both sides as Reset does:
// the client gets ECONNRESET or EOF and no byte of the reply. The match is made against one
// chunk's bytes (see the package documentation); a chunk a black hole throws away never counts.
func (p *Proxy) DropRepliesTo(substr string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f.dropLeft = max(n, 0)
	p.f.dropMatch = []byte(substr)
}

// Dropped returns how many connections have been reset by DropReplies or
// DropRepliesTo after the matching chunk was written to the target. It
// counts the drop before the connection is reset, so once the client has
// seen its error Dropped includes it. A drop whose reply did not come within
// the 2-second wait still counts.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// verdict is what to do with a chunk due to be forwarded.
type verdict int

const (
	forward   verdict = iota
	discard           // black hole
	dropReply         // forward, then drop the reply and reset
)

// judge decides the fate of chunk, due now, going to the server (up) or to
// the client; a dropReply verdict uses up one of the drops.
func (p *Proxy) judge(chunk []byte, up bool) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.f.blackhole:
		return discard
	case up && p.f.dropLeft > 0 && bytes.Contains(chunk, p.f.dropMatch):
		p.f.dropLeft--
		return dropReply
	}
	return forward
}

func (p *Proxy) latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.latency
}

func (p *Proxy) blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.blackhole
}

func (p *Proxy) countDrop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropped++
}
