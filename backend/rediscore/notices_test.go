package rediscore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakePubSub is a Driver whose pub/sub is an in-memory server: it confirms subscriptions at
// once, unless told to stay silent, and can break connections and end subscriptions.
type fakePubSub struct {
	hungDriver
	mu        sync.Mutex
	conns     map[*fakeConn]struct{}
	dials     int
	noSharded bool // SSUBSCRIBE is an unknown command
	refuseAll bool // dials fail
	silent    bool // subscriptions are not confirmed (until confirmHeld)
}

type fakeConn struct {
	s      *fakePubSub
	node   string
	events PubSubEvents
	subs   map[string]bool
	held   [][2]string // confirmations withheld while silent: reply kind, channel
}

func newFakePubSub() *fakePubSub { return &fakePubSub{conns: make(map[*fakeConn]struct{})} }

func (f *fakePubSub) PubSubNode(_ context.Context, channel string, sharded bool) (string, error) {
	if !sharded {
		return "", nil
	}
	return fmt.Sprintf("node%d", Slot(channel)%3), nil
}

func (f *fakePubSub) DialPubSub(_ context.Context, node string, events PubSubEvents) (PubSubConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	if f.refuseAll {
		return nil, errors.New("connection refused")
	}
	c := &fakeConn{s: f, node: node, events: events, subs: make(map[string]bool)}
	f.conns[c] = struct{}{}
	return c, nil
}

func (c *fakeConn) Do(_ context.Context, commands ...PubSubCommand) error {
	for _, cmd := range commands {
		if err := c.do(cmd.Name, cmd.Channels); err != nil {
			return err
		}
	}
	return nil
}

func (c *fakeConn) do(command string, channels []string) error {
	f := c.s
	f.mu.Lock()
	if _, live := f.conns[c]; !live {
		f.mu.Unlock()
		return errors.New("use of closed connection")
	}
	if command == "SSUBSCRIBE" && f.noSharded {
		f.mu.Unlock()
		return errors.New("ERR unknown command 'ssubscribe'")
	}
	if strings.HasPrefix(command, "S") && command != "SUBSCRIBE" {
		for _, ch := range channels {
			if Slot(ch) != Slot(channels[0]) {
				f.mu.Unlock()
				return errors.New("CROSSSLOT")
			}
		}
	}
	subscribe := !strings.Contains(command, "UNSUB")
	for _, ch := range channels {
		c.subs[ch] = subscribe
	}
	silent := f.silent
	if silent && subscribe {
		for _, ch := range channels {
			c.held = append(c.held, [2]string{strings.ToLower(command), ch})
		}
	}
	f.mu.Unlock()
	if !silent || !subscribe {
		for _, ch := range channels {
			c.events.Reply(strings.ToLower(command), ch)
		}
	}
	return nil
}

func (c *fakeConn) Close() {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

// publish sends a message on channel to every connection subscribed to it and returns how many
// there were.
func (f *fakePubSub) publish(channel string) int {
	f.mu.Lock()
	var to []*fakeConn
	for c := range f.conns {
		if c.subs[channel] {
			to = append(to, c)
		}
	}
	f.mu.Unlock()
	for _, c := range to {
		c.events.Message(channel, "")
	}
	return len(to)
}

// confirmHeld ends the silence: the live connections confirm the subscriptions they withheld.
func (f *fakePubSub) confirmHeld() {
	f.mu.Lock()
	f.silent = false
	var replies []func()
	for c := range f.conns {
		for _, r := range c.held {
			replies = append(replies, func() { c.events.Reply(r[0], r[1]) })
		}
		c.held = nil
	}
	f.mu.Unlock()
	for _, reply := range replies {
		reply()
	}
}

// kill breaks every live connection.
func (f *fakePubSub) kill() {
	f.mu.Lock()
	var killed []*fakeConn
	for c := range f.conns {
		killed = append(killed, c)
		delete(f.conns, c)
	}
	f.mu.Unlock()
	for _, c := range killed {
		c.events.Failed(errors.New("EOF"))
	}
}

// perNode returns the live connections per node.
func (f *fakePubSub) perNode() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := make(map[string]int)
	for c := range f.conns {
		n[c.node]++
	}
	return n
}

// waiter is one subscribed waiter of a test.
type waiter struct {
	channel string
	notices <-chan struct{}
	cancel  func()
}

func subscribeAll(t *testing.T, h *hub, n int) []waiter {
	t.Helper()
	ws := make([]waiter, n)
	for i := range ws {
		ch := Channel(fmt.Sprintf("key%d", i))
		notices, cancel, err := h.subscribe(t.Context(), ch)
		if err != nil {
			t.Fatalf("subscribe %s: %v", ch, err)
		}
		ws[i] = waiter{ch, notices, cancel}
	}
	return ws
}

func noticed(w waiter) bool {
	select {
	case <-w.notices:
		return true
	default:
		return false
	}
}

// Many channels share at most maxConns connections per node; each channel's messages reach its
// waiters only; the last waiter out closes the connections.
func TestNoticesShareConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer lingerOut()
		f := newFakePubSub()
		h := newHub(f, 2, DefaultNoticeLinger)
		ws := subscribeAll(t, h, 3000)
		for node, n := range f.perNode() {
			if n > 2 {
				t.Errorf("%s: %d connections for 3000 channels, want at most 2", node, n)
			}
		}
		if len(f.perNode()) != 3 {
			t.Errorf("connections to %d nodes, want 3", len(f.perNode()))
		}
		if n := f.publish(ws[7].channel); n != 1 {
			t.Fatalf("%s is subscribed on %d connections, want 1", ws[7].channel, n)
		}
		synctest.Wait()
		for i, w := range ws {
			if got := noticed(w); got != (i == 7) {
				t.Fatalf("waiter %d noticed: %v", i, got)
			}
		}
		for _, w := range ws {
			w.cancel()
		}
		synctest.Wait()
		if n := f.perNode(); len(n) != 3 {
			t.Fatalf("connections left right after every waiter left: %v, want them kept for DefaultNoticeLinger", n)
		}
		time.Sleep(DefaultNoticeLinger)
		synctest.Wait()
		if n := f.perNode(); len(n) != 0 {
			t.Fatalf("connections left DefaultNoticeLinger after every waiter left: %v", n)
		}
	})
}

// A broken connection wakes the waiters of all its channels and subscribes them again.
func TestNoticesSurviveBrokenConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer lingerOut()
		f := newFakePubSub()
		h := newHub(f, 2, DefaultNoticeLinger)
		var logged bytes.Buffer
		h.log = slog.New(slog.NewTextHandler(&logged, nil))
		ws := subscribeAll(t, h, 500)
		f.kill()
		synctest.Wait()
		if n := strings.Count(logged.String(), `level=WARN msg="locker: release-notice connection dropped, subscribing its channels again" node=`); n == 0 {
			t.Errorf("no record of the dropped connections:\n%s", logged.String())
		}
		for i, w := range ws {
			if !noticed(w) {
				t.Fatalf("waiter %d was not woken by the broken connection", i)
			}
		}
		time.Sleep(time.Minute) // past any pause between re-subscriptions
		synctest.Wait()
		for i, w := range ws {
			if f.publish(w.channel) != 1 {
				t.Fatalf("channel %d is not subscribed again", i)
			}
		}
		synctest.Wait()
		for i, w := range ws {
			if !noticed(w) {
				t.Fatalf("waiter %d missed a notice after the re-subscription", i)
			}
			w.cancel()
		}
	})
}

// A server without SSUBSCRIBE gets SUBSCRIBE; a subscription the server ends is placed again
// and its waiters are woken.
func TestNoticesUnshardedAndEndedByServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer lingerOut()
		f := newFakePubSub()
		f.noSharded = true
		h := newHub(f, 2, DefaultNoticeLinger)
		ws := subscribeAll(t, h, 10)
		if n := f.perNode(); n[""] == 0 || len(n) != 1 {
			t.Fatalf("connections %v, want unsharded ones only", n)
		}
		w := ws[3]
		var conn *fakeConn
		f.mu.Lock()
		for c := range f.conns {
			if c.subs[w.channel] {
				conn = c
			}
		}
		f.mu.Unlock()
		conn.events.Reply("unsubscribe", w.channel) // the server ended it
		synctest.Wait()
		if !noticed(w) {
			t.Fatal("the waiter of a subscription the server ended was not woken")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if f.publish(w.channel) != 1 {
			t.Fatal("a subscription the server ended was not placed again")
		}
		for _, w := range ws {
			w.cancel()
		}
	})
}

// A subscription the server never confirms ends with the caller's ctx; one whose connections
// all fail gives up after a few tries; either way nothing is left running.
func TestNoticesSubscribeBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer lingerOut()
		f := newFakePubSub()
		f.silent = true
		h := newHub(f, 2, DefaultNoticeLinger)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if _, _, err := h.subscribe(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("unconfirmed subscribe: %v, want the ctx's deadline", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("unconfirmed subscribe returned after %v, want 1s", waited)
		}

		f.refuseAll = true
		if _, _, err := h.subscribe(t.Context(), "b"); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("subscribe with every dial refused: %v, want the dial's error", err)
		}
		if f.dials < 1+subscribeTries {
			t.Fatalf("%d dials, want %d tries", f.dials-1, subscribeTries)
		}
		synctest.Wait()
		if n := f.perNode(); len(n) != 0 {
			t.Fatalf("connections left: %v", n)
		}
	})
}

// lingerOut lets the channels that linger after their last waiter left (DefaultNoticeLinger) go, with
// their connections, at the end of a synctest bubble.
func lingerOut() {
	time.Sleep(DefaultNoticeLinger)
	synctest.Wait()
}
