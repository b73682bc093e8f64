package rediscore

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker/internal/notify"
)

// Release notices travel on a few pub/sub connections per server node, shared by every key a
// Backend waits on: a key's channel is subscribed on one of them while the key has waiters and
// unsubscribed when the last one leaves. The hub below keeps that bookkeeping; a Driver only
// dials connections and sends (S)SUBSCRIBE and (S)UNSUBSCRIBE on them.

const (
	// DefaultNoticeConns is the default of WithNoticeConns.
	DefaultNoticeConns = 2
	// channelsPerConn is how many channels a notice connection carries before the hub opens
	// another one to the same node, up to the Backend's limit.
	channelsPerConn = 128
	// maxChannelsPerCommand bounds the channels of one (S)SUBSCRIBE or (S)UNSUBSCRIBE.
	maxChannelsPerCommand = 1000
	// subscribeTries is how many times a channel that the server never confirmed is placed on a
	// connection before its subscribe fails (the Client then waits on timers).
	subscribeTries = 3
	// Pauses before rounds of re-subscriptions after a connection failed, growing while they
	// fail, back to none at the next confirmation.
	resubscribeMinDelay = 50 * time.Millisecond
	resubscribeMaxDelay = 5 * time.Second
	// DefaultNoticeLinger is the default of WithNoticeLinger.
	DefaultNoticeLinger = time.Second
)

// hub multiplexes the channels of a Backend's waiters over at most maxConns connections per node.
// Every field below mu is guarded by it.
type hub struct {
	d        Driver
	maxConns int
	linger   time.Duration // how long an idle channel stays subscribed (WithNoticeLinger)
	unshared atomic.Bool   // the server has no sharded pub/sub: subscribe with SUBSCRIBE
	log      *slog.Logger  // WithLogger: records of dropped connections; nil: none

	mu        sync.Mutex
	subs      map[string]*channelSub   // by channel, while it has waiters
	nodes     map[string][]*noticeConn // live connections by node
	unplaced  map[*channelSub]struct{} // waiting for a connection (its last one broke)
	repairing bool                     // a goroutine places the unplaced channels
	settled   chan struct{}            // tells a pausing repair goroutine that none is left
	backoff   time.Duration            // pause before the next round of placements
}

// channelSub is one channel and its waiters.
type channelSub struct {
	channel   string
	key       string // the lock whose channel it is ("": notices are not read)
	waiters   map[*notify.Waiter]struct{}
	conn      *noticeConn   // the connection carrying it; nil while unplaced
	sharded   bool          // sent as SSUBSCRIBE
	confirmed bool          // the server confirmed it at least once
	tries     int           // placements since the last confirmation
	err       error         // why it failed, set before ready is closed
	ready     chan struct{} // closed at the first confirmation, or when it failed
	gone      bool          // out of hub.subs: its last waiter left, or it failed
	idle      time.Time     // when its last waiter left
	lingering bool          // a timer will unsubscribe it if it is still idle (h.linger)
}

// noticeConn is one shared pub/sub connection. It implements PubSubEvents.
type noticeConn struct {
	h       *hub
	node    string
	pc      PubSubConn             // nil until dialed
	subs    map[string]*channelSub // the channels it carries
	pending map[string]int         // (S)SUBSCRIBEs queued or sent, not yet confirmed
	unsubs  map[string]int         // (S)UNSUBSCRIBEs queued or sent, not yet confirmed
	queue   []pubsubCommand        // commands for the writer, in order
	kick    chan struct{}          // wakes the writer; capacity 1
	done    chan struct{}          // closed when the connection is retired or broke
	dead    bool
}

type pubsubCommand struct{ name, channel string }

func newHub(d Driver, maxConns int, linger time.Duration) *hub {
	return &hub{
		d:        d,
		maxConns: maxConns,
		linger:   linger,
		subs:     make(map[string]*channelSub),
		nodes:    make(map[string][]*noticeConn),
		unplaced: make(map[*channelSub]struct{}),
		settled:  make(chan struct{}, 1),
	}
}

// subscribe adds a waiter to channel and returns once the server has confirmed the channel's
// subscription (at once when another waiter's subscription is up), ctx ended, or CallTimeout
// passed. cancel removes the waiter; the last one out unsubscribes (see WithNoticeLinger).
func (h *hub) subscribe(ctx context.Context, channel string) (<-chan struct{}, func(), error) {
	w := notify.NewPlain()
	cancel, err := h.join(ctx, channel, "", w)
	return w.Plain, cancel, err
}

// subscribeAs is subscribe for a waiter of lock key whose owner token is owner
// (locker.Granter.SubscribeAs): it receives "" for a notice that grants nothing, the request ID
// of the grant for a grant to owner, and nothing for a grant to another owner.
func (h *hub) subscribeAs(ctx context.Context, channel, key, owner string) (<-chan string, func(), error) {
	w := notify.NewOwner(owner)
	cancel, err := h.join(ctx, channel, key, w)
	return w.Granted, cancel, err
}

// join adds w to channel (of lock key, "" when unknown) and waits as subscribe says.
func (h *hub) join(ctx context.Context, channel, key string, w *notify.Waiter) (func(), error) {
	h.mu.Lock()
	s := h.subs[channel]
	fresh := s == nil
	if fresh {
		s = &channelSub{channel: channel, waiters: make(map[*notify.Waiter]struct{}), ready: make(chan struct{})}
		h.subs[channel] = s
	}
	if key != "" {
		s.key = key
	}
	s.waiters[w] = struct{}{}
	h.mu.Unlock()

	wait, stop := context.WithTimeout(ctx, CallTimeout)
	defer stop()
	if fresh {
		h.place(wait, s)
	}
	select {
	case <-s.ready:
	case <-wait.Done():
	}
	h.mu.Lock()
	confirmed, err := s.confirmed, s.err
	h.mu.Unlock()
	if !confirmed {
		h.leave(s, w)
		if err == nil {
			err = wait.Err()
		}
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { h.leave(s, w) }) }, nil
}

// place puts s on a connection to the node of its channel and queues its subscription.
func (h *hub) place(ctx context.Context, s *channelSub) {
	sharded := !h.unshared.Load()
	node, err := h.d.PubSubNode(ctx, s.channel, sharded)
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone {
		return
	}
	if err != nil {
		h.slowDown()
		h.unplace(s, err, true)
		return
	}
	c := h.connFor(node)
	s.conn, s.sharded = c, sharded
	c.subs[s.channel] = s
	c.pending[s.channel]++
	c.send(subscribeCommand(sharded), s.channel)
}

// connFor returns the connection of node that should carry one more channel: the least loaded,
// or a new one while all carry channelsPerConn or more and there are fewer than maxConns.
func (h *hub) connFor(node string) *noticeConn {
	var best *noticeConn
	for _, c := range h.nodes[node] {
		if best == nil || len(c.subs) < len(best.subs) {
			best = c
		}
	}
	if best != nil && (len(best.subs) < channelsPerConn || len(h.nodes[node]) >= h.maxConns) {
		return best
	}
	c := &noticeConn{
		h: h, node: node,
		subs:    make(map[string]*channelSub),
		pending: make(map[string]int),
		unsubs:  make(map[string]int),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	h.nodes[node] = append(h.nodes[node], c)
	go c.run()
	return c
}

// leave removes waiter w of s. When w was the last one, s stays subscribed for h.linger if it
// is up (confirmed, on a connection), and is unsubscribed then unless a waiter came meanwhile;
// otherwise at once.
func (h *hub) leave(s *channelSub, w *notify.Waiter) {
	h.mu.Lock()
	delete(s.waiters, w)
	var closing PubSubConn
	if len(s.waiters) == 0 && !s.gone {
		s.idle = time.Now()
		switch {
		case !s.confirmed || s.conn == nil || h.linger == 0: // not up: nothing to keep
			closing = h.unsubscribe(s)
		case !s.lingering:
			s.lingering = true
			time.AfterFunc(h.linger, func() { h.expire(s) })
		}
	}
	h.mu.Unlock()
	if closing != nil {
		go closing.Close()
	}
}

// expire unsubscribes s if it has had no waiter for h.linger, or waits on for the rest of
// that time if it has none but had one meanwhile.
func (h *hub) expire(s *channelSub) {
	h.mu.Lock()
	var closing PubSubConn
	switch left := h.linger - time.Since(s.idle); {
	case s.gone || len(s.waiters) > 0:
		s.lingering = false
	case left > 0:
		time.AfterFunc(left, func() { h.expire(s) })
	default:
		s.lingering = false
		closing = h.unsubscribe(s)
	}
	h.mu.Unlock()
	if closing != nil {
		go closing.Close()
	}
}

// unsubscribe takes s out of the hub and off its connection, and returns that connection's
// driver connection for the caller to close outside h.mu when s was its last channel (nil
// otherwise). h.mu must be held.
func (h *hub) unsubscribe(s *channelSub) PubSubConn {
	h.drop(s)
	c := s.conn
	if c == nil {
		return nil
	}
	s.conn = nil
	delete(c.subs, s.channel)
	if len(c.subs) == 0 {
		return h.retire(c)
	}
	c.unsubs[s.channel]++
	c.send(unsubscribeCommand(s.sharded), s.channel)
	return nil
}

// drop takes s out of the hub. h.mu must be held.
func (h *hub) drop(s *channelSub) {
	s.gone = true
	if h.subs[s.channel] == s {
		delete(h.subs, s.channel)
	}
	if _, ok := h.unplaced[s]; ok {
		delete(h.unplaced, s)
		if len(h.unplaced) == 0 {
			select {
			case h.settled <- struct{}{}:
			default:
			}
		}
	}
}

// unplace wakes the waiters of s, whose subscription is down (notices may be missed until it is
// back), and hands s to the repair goroutine, which places it again; a channel never confirmed
// fails instead after subscribeTries placements. counted is false when the failure was not the
// channel's (the server refused SSUBSCRIBE as a whole). h.mu must be held.
func (h *hub) unplace(s *channelSub, err error, counted bool) {
	s.conn = nil
	if s.confirmed {
		s.wake() // those who already wait on it may miss notices
	}
	if counted {
		s.tries++
	}
	if !s.confirmed && s.tries >= subscribeTries {
		h.drop(s)
		s.err = err
		close(s.ready)
		return
	}
	h.unplaced[s] = struct{}{}
	if !h.repairing {
		h.repairing = true
		go h.repair()
	}
}

// repair places the unplaced channels again, pausing between rounds while connections fail,
// until none is left.
func (h *hub) repair() {
	for {
		h.mu.Lock()
		if len(h.unplaced) == 0 {
			h.repairing = false
			h.mu.Unlock()
			return
		}
		delay := h.backoff
		h.mu.Unlock()
		if delay > 0 {
			h.pause(delay)
		}
		h.mu.Lock()
		batch := make([]*channelSub, 0, len(h.unplaced))
		for s := range h.unplaced {
			batch = append(batch, s)
		}
		clear(h.unplaced)
		h.mu.Unlock()
		for _, s := range batch {
			ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
			h.place(ctx, s)
			cancel()
		}
	}
}

// pause waits for delay, or until no channel is left to place.
func (h *hub) pause(delay time.Duration) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-h.settled:
			h.mu.Lock()
			empty := len(h.unplaced) == 0
			h.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// slowDown lengthens the pause between rounds of placements. h.mu must be held.
func (h *hub) slowDown() {
	h.backoff = min(max(2*h.backoff, resubscribeMinDelay), resubscribeMaxDelay)
}

// retire takes c out of service and returns its driver connection for the caller to close
// outside h.mu (nil when it is not dialed yet: run closes it then). h.mu must be held.
func (h *hub) retire(c *noticeConn) PubSubConn {
	if c.dead {
		return nil
	}
	c.dead = true
	close(c.done)
	conns := h.nodes[c.node]
	for i, other := range conns {
		if other == c {
			conns = append(conns[:i], conns[i+1:]...)
			break
		}
	}
	if len(conns) == 0 {
		delete(h.nodes, c.node)
	} else {
		h.nodes[c.node] = conns
	}
	return c.pc
}

// broken retires c after err (its connection ended, or the server refused a command on it) and
// places its channels again, on other connections.
func (h *hub) broken(c *noticeConn, err error) {
	h.mu.Lock()
	if c.dead {
		h.mu.Unlock()
		return
	}
	closing := h.retire(c)
	counted := true
	if IsUnknownCommand(err) && !h.unshared.Load() {
		// The server has no SSUBSCRIBE (Redis before 7, miniredis): every channel goes unsharded.
		h.unshared.Store(true)
		counted = false
	} else {
		h.slowDown() // until a confirmation: a node that keeps failing is not hammered
	}
	for _, s := range c.subs {
		h.unplace(s, err, counted)
	}
	channels := len(c.subs)
	clear(c.subs)
	h.mu.Unlock()
	if closing != nil {
		go closing.Close()
	}
	if h.log != nil && channels > 0 {
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "locker: release-notice connection dropped, subscribing its channels again",
			slog.String("node", c.node), slog.Int("channels", channels), slog.Any("error", err))
	}
}

// wake sends a notice that grants nothing to every waiter of s, without blocking. hub.mu must
// be held.
func (s *channelSub) wake() { s.wakeFor("", "") }

// wakeFor sends the notice of a grant to grantee with request ID id ("", "": a notice that
// grants nothing) to the waiters of s, without blocking (see notify.Waiter). hub.mu must be held.
func (s *channelSub) wakeFor(grantee, id string) {
	for w := range s.waiters {
		w.Notify(grantee, id)
	}
}

// grant returns the owner and request ID that a notice message names (release.lua:
// "<lock>\n<length of the ID>:<ID><owner>" after a grant), or "", "" when it names none or s does
// not know its lock.
func (s *channelSub) grant(message string) (owner, id string) {
	n := len(s.key)
	if n == 0 || len(message) <= n+1 || message[n] != '\n' || message[:n] != s.key {
		return "", ""
	}
	rest := message[n+1:]
	colon := strings.IndexByte(rest, ':')
	size, err := strconv.Atoi(rest[:max(colon, 0)])
	if colon < 0 || err != nil || size < 0 || size > len(rest)-colon-1 {
		return "", ""
	}
	return rest[colon+1+size:], rest[colon+1 : colon+1+size]
}

// send queues a command for c's writer. hub.mu must be held.
func (c *noticeConn) send(name, channel string) {
	c.queue = append(c.queue, pubsubCommand{name, channel})
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run dials c, then sends its queued commands in order, consecutive ones of a kind together.
func (c *noticeConn) run() {
	h := c.h
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	pc, err := h.d.DialPubSub(ctx, c.node, c)
	cancel()
	if err != nil {
		h.broken(c, err)
		return
	}
	h.mu.Lock()
	dead := c.dead
	c.pc = pc
	h.mu.Unlock()
	if dead {
		pc.Close()
		return
	}
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		h.mu.Lock()
		queue := c.queue
		c.queue = nil
		h.mu.Unlock()
		if len(queue) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
		err := pc.Do(ctx, commands(queue)...)
		cancel()
		if err != nil {
			h.broken(c, err)
			return
		}
	}
}

// commands turns queued commands into as few as keep their order: consecutive ones of a kind
// together, those of a sharded kind grouped by slot (a sharded command's channels must share
// one), at most maxChannelsPerCommand channels in each.
func commands(queue []pubsubCommand) []PubSubCommand {
	var out []PubSubCommand
	for len(queue) > 0 {
		name := queue[0].name
		n := 1
		for n < len(queue) && queue[n].name == name {
			n++
		}
		sharded := name == "SSUBSCRIBE" || name == "SUNSUBSCRIBE"
		bySlot := make(map[uint16]int) // slot → index in out of the command open for it
		for _, q := range queue[:n] {
			var slot uint16
			if sharded {
				slot = Slot(q.channel)
			}
			i, ok := bySlot[slot]
			if !ok || len(out[i].Channels) == maxChannelsPerCommand {
				i = len(out)
				bySlot[slot] = i
				out = append(out, PubSubCommand{Name: name})
			}
			out[i].Channels = append(out[i].Channels, q.channel)
		}
		queue = queue[n:]
	}
	return out
}

// Message implements PubSubEvents: a notice wakes the waiters of its channel (when it names the
// owner a release granted the key to, that owner's only).
func (c *noticeConn) Message(channel, message string) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if s := c.subs[channel]; s != nil && !c.dead {
		s.wakeFor(s.grant(message))
	}
}

// Reply implements PubSubEvents: a confirmed subscription is up (its waiters wake when it is
// back after a break: notices may have been missed); an unsubscription nobody asked for means the
// server ended the channel's subscription (its slot moved), so it is placed again.
func (c *noticeConn) Reply(kind, channel string) {
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.dead {
		return
	}
	s := c.subs[channel]
	switch kind {
	case "subscribe", "ssubscribe":
		if c.pending[channel]--; c.pending[channel] > 0 {
			return
		}
		delete(c.pending, channel)
		h.backoff = 0
		if s == nil {
			return
		}
		s.tries = 0
		if !s.confirmed {
			s.confirmed = true
			close(s.ready)
		} else {
			s.wake()
		}
	case "unsubscribe", "sunsubscribe":
		if c.unsubs[channel] > 0 {
			if c.unsubs[channel]--; c.unsubs[channel] == 0 {
				delete(c.unsubs, channel)
			}
			return
		}
		if s != nil {
			delete(c.subs, channel)
			h.slowDown()
			h.unplace(s, errors.New("the server ended the subscription of "+channel), false)
			if len(c.subs) == 0 {
				if pc := h.retire(c); pc != nil {
					go pc.Close()
				}
			}
		}
	}
}

// Failed implements PubSubEvents.
func (c *noticeConn) Failed(err error) { c.h.broken(c, err) }

func subscribeCommand(sharded bool) string {
	if sharded {
		return "SSUBSCRIBE"
	}
	return "SUBSCRIBE"
}

func unsubscribeCommand(sharded bool) string {
	if sharded {
		return "SUNSUBSCRIBE"
	}
	return "UNSUBSCRIBE"
}
