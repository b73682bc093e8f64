package compare_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker/internal/testkit/bench"
)

// The semaphore Redisson's RSemaphore is, written here for the comparison (no Go library offers
// one): a string counter of the permits left per key, taken with a script that decrements it
// while it is positive and given back with one that increments it and publishes on the key's
// channel, which waiters listen to (one pub/sub connection per client), trying again on every
// message or after a fallback of 100ms. Its permits have no lease and no owner: a holder that
// crashes keeps its permit for ever, and a release by anyone frees one.

// counterAcquire takes a permit of KEYS[1], a counter made with ARGV[1] permits on first use:
// 1 when it took one, 0 when none is left.
var counterAcquire = redis.NewScript(`
local left = redis.call('get', KEYS[1])
if not left then
  redis.call('set', KEYS[1], ARGV[1])
  left = ARGV[1]
end
if tonumber(left) > 0 then
  redis.call('decr', KEYS[1])
  return 1
end
return 0`)

// counterRelease gives a permit of KEYS[1] back and tells the waiters on channel ARGV[1].
var counterRelease = redis.NewScript(`
redis.call('incr', KEYS[1])
redis.call('publish', ARGV[1], '1')
return 1`)

// counterFallback is how long a waiter of the counter semaphore waits when no message comes.
const counterFallback = 100 * time.Millisecond

func counterSemaphoreLib(addr string) bench.Lib {
	return bench.Lib{
		Name:   "counter-semaphore",
		Driver: "goredis",
		Floor:  goredisFloor(addr),
		Open: func() (bench.Mutex, func(), error) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			m := &counterSemaphore{c: c, waiters: map[string][]chan struct{}{}}
			return m, func() {
				m.mu.Lock()
				if m.sub != nil {
					m.sub.Close()
				}
				m.mu.Unlock()
				c.Close()
			}, nil
		},
	}
}

// counterSemaphore is one client of the counter semaphore: a go-redis client and its one
// subscription, whose messages wake every local waiter of the key.
type counterSemaphore struct {
	c *redis.Client

	mu      sync.Mutex
	sub     *redis.PubSub
	waiters map[string][]chan struct{} // by channel
}

// Lock does not apply: this library has no lock.
func (m *counterSemaphore) Lock(context.Context, string) (bench.Held, error) {
	return nil, bench.ErrNotApplicable
}

// Acquire takes one of the n permits of key, waiting for a message or the fallback between tries.
func (m *counterSemaphore) Acquire(ctx context.Context, key string, n int) (bench.Held, error) {
	channel := "semaphore:" + key
	wake, err := m.listen(ctx, channel)
	if err != nil {
		return nil, err
	}
	defer m.stop(channel, wake)
	timer := time.NewTimer(counterFallback)
	defer timer.Stop()
	for {
		got, err := counterAcquire.Run(ctx, m.c, []string{key}, n).Int()
		if err != nil {
			return nil, err
		}
		if got == 1 {
			return counterHeld{m: m, key: key, channel: channel}, nil
		}
		timer.Reset(counterFallback)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// listen registers a waiter of channel, subscribing the client's connection to it first.
func (m *counterSemaphore) listen(ctx context.Context, channel string) (chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sub == nil {
		m.sub = m.c.Subscribe(ctx)
		go m.deliver(m.sub.Channel())
	}
	if len(m.waiters[channel]) == 0 {
		if err := m.sub.Subscribe(ctx, channel); err != nil {
			return nil, err
		}
	}
	wake := make(chan struct{}, 1)
	m.waiters[channel] = append(m.waiters[channel], wake)
	return wake, nil
}

// stop removes the waiter wake of channel.
func (m *counterSemaphore) stop(channel string, wake chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := m.waiters[channel]
	for i, w := range ws {
		if w == wake {
			m.waiters[channel] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
}

// deliver wakes every waiter of a message's channel, until the subscription closes.
func (m *counterSemaphore) deliver(messages <-chan *redis.Message) {
	for msg := range messages {
		m.mu.Lock()
		for _, w := range m.waiters[msg.Channel] {
			select {
			case w <- struct{}{}:
			default:
			}
		}
		m.mu.Unlock()
	}
}

type counterHeld struct {
	m            *counterSemaphore
	key, channel string
}

func (h counterHeld) Context() context.Context { return noContext }

func (h counterHeld) Unlock() error {
	err := counterRelease.Run(context.Background(), h.m.c, []string{h.key}, h.channel).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
