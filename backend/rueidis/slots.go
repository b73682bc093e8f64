package rueidislocker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// slotMapMaxAge is how long a fetched slot map is trusted before the next lookup fetches it
// again: slots move rarely, and a channel placed on a stale node is refused (MOVED) or ended
// by the server, then placed again.
const slotMapMaxAge = time.Second

// slotMap caches which master serves each cluster slot, for the sharded notices of a cluster
// client: rueidis routes commands by slot but does not tell which node a slot is on.
type slotMap struct {
	mu      sync.Mutex
	fetched time.Time
	masters []slotRange
}

type slotRange struct {
	first, last int64
	addr        string
}

// master returns the address of the master of slot, as rueidis's Nodes names it.
func (m *slotMap) master(ctx context.Context, c rueidis.Client, slot uint16) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.fetched) > slotMapMaxAge {
		masters, err := fetchSlots(ctx, c)
		if err != nil {
			return "", err
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

// forget makes the next lookup fetch the slot map again.
func (m *slotMap) forget() {
	m.mu.Lock()
	m.fetched = time.Time{}
	m.mu.Unlock()
}

// fetchSlots reads CLUSTER SLOTS: for each range, its first and last slot and its master's host
// and port.
func fetchSlots(ctx context.Context, c rueidis.Client) ([]slotRange, error) {
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	out := make([]slotRange, 0, len(ranges))
	for _, r := range ranges {
		fields, err := r.ToArray()
		if err != nil || len(fields) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected range %v", r)
		}
		master, err := fields[2].ToArray()
		if err != nil || len(master) < 2 {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected node %v", fields[2])
		}
		first, err1 := fields[0].AsInt64()
		last, err2 := fields[1].AsInt64()
		host, err3 := master[0].ToString()
		port, err4 := master[1].AsInt64()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected range %v", r)
		}
		out = append(out, slotRange{first, last, net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return out, nil
}
