package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Timing of re-subscriptions after a driver lost one.
const (
	resubscribeMinDelay = 50 * time.Millisecond // first pause between failed attempts
	resubscribeMaxDelay = 5 * time.Second       // longest pause between failed attempts
)

// hub shares one driver subscription per channel between every waiter of that channel, ends it
// when the last waiter leaves (no connection per waiter, none left behind), and subscribes again
// when the driver loses it, waking the waiters since notices may have been missed meanwhile.
type hub struct {
	d        Driver
	unshared atomic.Bool // the server has no sharded pub/sub: subscribe with SUBSCRIBE

	mu   sync.Mutex
	subs map[string]*channelSub
}

// channelSub is the subscription of one channel. Fields but ready and life are guarded by
// hub.mu.
type channelSub struct {
	waiters map[chan struct{}]struct{}
	ready   chan struct{}      // closed once the first driver Subscribe returned
	err     error              // the first Subscribe's error, set before ready is closed
	stop    func()             // ends the current driver subscription; nil when there is none
	left    bool               // the last waiter left: no more subscriptions
	life    context.Context    // ends when the last waiter leaves
	end     context.CancelFunc // ends life
}

func newHub(d Driver) *hub {
	return &hub{d: d, subs: make(map[string]*channelSub)}
}

// subscribe adds a waiter to channel, subscribing on the first one, and returns once the
// subscription is active.
func (h *hub) subscribe(ctx context.Context, channel string) (<-chan struct{}, func(), error) {
	w := make(chan struct{}, 1)
	h.mu.Lock()
	s := h.subs[channel]
	first := s == nil
	if first {
		s = &channelSub{waiters: make(map[chan struct{}]struct{}), ready: make(chan struct{})}
		s.life, s.end = context.WithCancel(context.Background())
		h.subs[channel] = s
	}
	s.waiters[w] = struct{}{}
	h.mu.Unlock()

	if first {
		stop, err := h.open(ctx, channel, s)
		h.mu.Lock()
		s.stop, s.err = stop, err
		h.mu.Unlock()
		close(s.ready)
	} else {
		select {
		case <-s.ready:
		case <-ctx.Done():
			h.leave(channel, s, w)
			return nil, nil, ctx.Err()
		}
	}
	if s.err != nil {
		h.leave(channel, s, w)
		return nil, nil, s.err
	}
	var once sync.Once
	return w, func() { once.Do(func() { h.leave(channel, s, w) }) }, nil
}

// open subscribes the driver to channel, sharded unless the server showed it cannot.
func (h *hub) open(ctx context.Context, channel string, s *channelSub) (func(), error) {
	notify := func() { h.notify(channel) }
	lost := func() { go h.resubscribe(channel, s) }
	if !h.unshared.Load() {
		stop, err := h.d.Subscribe(ctx, channel, true, notify, lost)
		if !errors.Is(err, ErrUnsupported) {
			return stop, err
		}
		h.unshared.Store(true)
	}
	return h.d.Subscribe(ctx, channel, false, notify, lost)
}

// resubscribe replaces a subscription the driver lost, with a growing pause between failed
// attempts, until it succeeds or the last waiter leaves; then it wakes the waiters.
func (h *hub) resubscribe(channel string, s *channelSub) {
	<-s.ready         // the lost subscription's stop is recorded
	h.notify(channel) // notices may be lost until the new subscription is up
	h.mu.Lock()
	old := s.stop
	s.stop = nil
	h.mu.Unlock()
	if old != nil {
		old() // frees what the lost subscription still held
	}
	for delay := resubscribeMinDelay; ; delay = min(2*delay, resubscribeMaxDelay) {
		ctx, cancel := context.WithTimeout(s.life, CallTimeout)
		stop, err := h.open(ctx, channel, s)
		cancel()
		if err == nil {
			h.mu.Lock()
			left := s.left
			if !left {
				s.stop = stop
			}
			h.mu.Unlock()
			if left {
				stop()
				return
			}
			h.notify(channel)
			return
		}
		select {
		case <-s.life.Done():
			return
		case <-time.After(delay):
		}
	}
}

// leave removes waiter w of s; the last one out ends the subscription.
func (h *hub) leave(channel string, s *channelSub, w chan struct{}) {
	h.mu.Lock()
	delete(s.waiters, w)
	var stop func()
	if len(s.waiters) == 0 {
		s.left = true
		stop, s.stop = s.stop, nil
		if h.subs[channel] == s {
			delete(h.subs, channel)
		}
		s.end()
	}
	h.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// notify wakes every waiter of channel without blocking.
func (h *hub) notify(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[channel]; s != nil {
		for w := range s.waiters {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
}
