package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// hub shares one driver subscription per channel between every waiter of that channel, and
// ends it when the last waiter leaves: no connection per waiter, none left behind.
type hub struct {
	d        Driver
	unshared atomic.Bool // the server has no sharded pub/sub: subscribe with SUBSCRIBE

	mu   sync.Mutex
	subs map[string]*channelSub
}

// channelSub is the subscription of one channel.
type channelSub struct {
	waiters map[chan struct{}]struct{}
	ready   chan struct{} // closed once the driver's Subscribe returned
	stop    func()        // set before ready is closed, nil if Subscribe failed
	err     error         // set before ready is closed
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
		h.subs[channel] = s
	}
	s.waiters[w] = struct{}{}
	h.mu.Unlock()

	if first {
		s.stop, s.err = h.open(ctx, channel)
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
func (h *hub) open(ctx context.Context, channel string) (func(), error) {
	notify := func() { h.notify(channel) }
	if !h.unshared.Load() {
		stop, err := h.d.Subscribe(ctx, channel, true, notify)
		if !errors.Is(err, ErrUnsupported) {
			return stop, err
		}
		h.unshared.Store(true)
	}
	return h.d.Subscribe(ctx, channel, false, notify)
}

// leave removes waiter w of s; the last one out ends the subscription (or, if it is still being
// opened, lets the opener's failure or the next leave end it).
func (h *hub) leave(channel string, s *channelSub, w chan struct{}) {
	h.mu.Lock()
	delete(s.waiters, w)
	last := len(s.waiters) == 0
	if last && h.subs[channel] == s {
		delete(h.subs, channel)
	}
	h.mu.Unlock()
	if last {
		<-s.ready // the opener is the first waiter and leaves only after ready, so this never blocks long
		if s.stop != nil {
			s.stop()
		}
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
