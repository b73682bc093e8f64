package rediscore

import (
	"context"
	"fmt"
	"iter"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// slotMapMaxAge is how long a fetched slot map is trusted before the next lookup fetches it
// again: slots move rarely, and a channel placed on a stale node is refused (MOVED) or ended
// by the server, then placed again.
const slotMapMaxAge = time.Second

// SlotMap caches which master serves each slot of a Redis Cluster, for a Driver's PubSubNode
// when its client routes commands by slot but does not tell which node a slot is on (rueidis,
// valkey-go). It reads CLUSTER SLOTS through the fetch func given to NewSlotMap, at most once a
// second. It is safe for concurrent use.
type SlotMap struct {
	fetch   func(context.Context) (any, error)
	mu      sync.Mutex
	fetched time.Time
	masters []slotRange
}

type slotRange struct {
	first, last int64
	addr        string
}

// NewSlotMap returns an empty SlotMap that reads CLUSTER SLOTS with fetch: it sends the command
// and returns its reply decoded into Go values (the rueidis family's ToAny; Redigo's Do), an
// []any of ranges, each an []any of the first slot, the last slot and the master as an []any
// of host (a string or []byte) and port (int64), then anything; or the command's error.
func NewSlotMap(fetch func(ctx context.Context) (any, error)) *SlotMap {
	return &SlotMap{fetch: fetch}
}

// Master returns the address ("host:port", as the server names its master) of the master of
// slot, fetching CLUSTER SLOTS first when the map is older than a second or forgotten. Its
// error wraps fetch's, or says that no master serves slot.
func (m *SlotMap) Master(ctx context.Context, slot uint16) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.fetched) > slotMapMaxAge {
		v, err := m.fetch(ctx)
		if err != nil {
			return "", display.Errorf("CLUSTER SLOTS: %w", err)
		}
		masters, err := parseSlots(v)
		if err != nil {
			return "", display.Errorf("CLUSTER SLOTS: %w", err)
		}
		m.masters, m.fetched = masters, time.Now()
	}
	for _, r := range m.masters {
		if int64(slot) >= r.first && int64(slot) <= r.last {
			return r.addr, nil
		}
	}
	return "", fmt.Errorf("no master serves slot %d", slot)
}

// Forget makes the next Master fetch CLUSTER SLOTS again.
func (m *SlotMap) Forget() {
	m.mu.Lock()
	m.fetched = time.Time{}
	m.mu.Unlock()
}

// ForgetIfMoved calls Forget when err is a MOVED or ASK reply (a slot has moved), and returns
// err.
func (m *SlotMap) ForgetIfMoved(err error) error {
	if Moved(err) != err {
		m.Forget()
	}
	return err
}

// parseSlots reads a decoded CLUSTER SLOTS reply: for each range, its first and last slot and
// its master's host and port.
func parseSlots(v any) ([]slotRange, error) {
	ranges, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	out := make([]slotRange, 0, len(ranges))
	for _, r := range ranges {
		fields, ok := r.([]any)
		if !ok || len(fields) < 3 {
			return nil, fmt.Errorf("unexpected range %v", r)
		}
		master, ok := fields[2].([]any)
		if !ok || len(master) < 2 {
			return nil, fmt.Errorf("unexpected node %v", fields[2])
		}
		first, ok1 := fields[0].(int64)
		last, ok2 := fields[1].(int64)
		host, ok3 := text(master[0])
		port, ok4 := master[1].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, fmt.Errorf("unexpected range %v", r)
		}
		out = append(out, slotRange{first, last, net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return out, nil
}

// text returns v as a string when it is one, or a []byte (as Redigo decodes bulk strings).
func text(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
}

// PubSubNode is Driver.PubSubNode for a cluster client that names its nodes by address, as
// CLUSTER SLOTS does: "" for an unsharded channel, the one node when nodes (the client's) has
// one (miniredis answers CLUSTER SLOTS, so such a client takes it for a cluster), else Master
// of the channel's slot.
func (m *SlotMap) PubSubNode(ctx context.Context, channel string, sharded bool, nodes iter.Seq[string]) (string, error) {
	if !sharded {
		return "", nil
	}
	only, n := "", 0
	for addr := range nodes {
		if only, n = addr, n+1; n > 1 {
			break
		}
	}
	if n == 1 {
		return only, nil
	}
	return m.Master(ctx, Slot(channel))
}
