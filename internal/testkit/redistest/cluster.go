package redistest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NumSlots is the number of hash slots in a Redis Cluster.
const NumSlots = 16384

const clusterTimeout = 20 * time.Second // nodes started until the cluster is ok

// Cluster is a Redis Cluster of N masters (no replicas) started for a test.
type Cluster struct {
	// Addrs are the nodes' addresses, "127.0.0.1:port", in the order of
	// Nodes. Node i serves the i-th of N equal ranges of the 16384 slots.
	Addrs []string
	// Nodes are the node servers; each can be stopped and restarted on its
	// own (Restart does not wait for the cluster to be ok again).
	Nodes []*Server
}

// StartCluster starts a Redis Cluster of masters nodes (masters >= 3, no
// replicas), each a redis-server with its own free port (whose bus port,
// port+10000, was free too), temp dir and cluster-node-timeout 5000 ms. Node i
// is assigned the i-th of masters equal ranges of the 16384 slots and config
// epoch i+1, and every node is introduced to the first with CLUSTER MEET.
//
// It returns only when, on every node, CLUSTER INFO reports cluster_state:ok
// and cluster_known_nodes equal to masters, and CLUSTER SLOTS covers all
// 16384 slots with masters distinct masters; it fails the test if that takes
// more than 20 seconds. It skips or fails the test as Require does when
// redis-server is missing. All nodes are killed and reaped in t.Cleanup.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if !require(t) {
		return nil
	}
	if masters < 3 {
		t.Fatalf("redistest: StartCluster needs at least 3 masters, got %d", masters)
		return nil
	}
	c := &Cluster{}
	for range masters {
		s := startServer(t, config{cluster: true})
		if s == nil {
			return nil
		}
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	for i, n := range c.Nodes {
		// Distinct epochs up front, so no epoch-collision round is needed.
		if _, err := Do(n.Addr, DefaultTimeout, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			t.Fatalf("redistest: CLUSTER SET-CONFIG-EPOCH %d on %s: %v", i+1, n.Addr, err)
			return nil
		}
		lo, hi := i*NumSlots/masters, (i+1)*NumSlots/masters-1
		if err := addSlots(n.Addr, lo, hi); err != nil {
			t.Fatalf("redistest: assign slots %d-%d to %s: %v", lo, hi, n.Addr, err)
			return nil
		}
	}
	first := c.Nodes[0]
	for _, n := range c.Nodes[1:] {
		if _, err := Do(n.Addr, DefaultTimeout, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(first.Port)); err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s from %s: %v", first.Addr, n.Addr, err)
			return nil
		}
	}

	deadline := time.Now().Add(clusterTimeout)
	for {
		err := c.check()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster %v not ready within %v: %v", c.Addrs, clusterTimeout, err)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops every node (see Server.Stop). Idempotent.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// addSlots assigns slots lo..hi to the node at addr, with ADDSLOTSRANGE
// (Redis 7+) or, if that subcommand is unknown, ADDSLOTS.
func addSlots(addr string, lo, hi int) error {
	_, err := Do(addr, DefaultTimeout, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	var rerr Error
	if err == nil || !errors.As(err, &rerr) || !strings.Contains(strings.ToLower(string(rerr)), "unknown subcommand") {
		return err
	}
	args := []string{"CLUSTER", "ADDSLOTS"}
	for s := lo; s <= hi; s++ {
		args = append(args, strconv.Itoa(s))
	}
	_, err = Do(addr, DefaultTimeout, args...)
	return err
}

// check returns nil if every node sees a complete, healthy cluster.
func (c *Cluster) check() error {
	n := len(c.Nodes)
	for _, addr := range c.Addrs {
		v, err := Do(addr, time.Second, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		info, _ := v.(string)
		if st := infoField(info, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", addr, st)
		}
		if k := infoField(info, "cluster_known_nodes"); k != strconv.Itoa(n) {
			return fmt.Errorf("%s: cluster_known_nodes:%s, want %d", addr, k, n)
		}
		ranges, err := clusterSlots(addr)
		if err != nil {
			return err
		}
		if err := checkCoverage(ranges, n); err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %v", addr, err)
		}
	}
	return nil
}

// slotRange is one entry of CLUSTER SLOTS: slots Start..End served by the
// master at Addr with node ID ID.
type slotRange struct {
	Start, End int
	Addr, ID   string
}

// clusterSlots returns the node at addr's view of CLUSTER SLOTS (masters only).
func clusterSlots(addr string) ([]slotRange, error) {
	v, err := Do(addr, time.Second, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	entries, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: CLUSTER SLOTS replied %T, want an array", addr, v)
	}
	var out []slotRange
	for _, e := range entries {
		f, ok := e.([]any)
		if !ok || len(f) < 3 {
			return nil, fmt.Errorf("%s: malformed CLUSTER SLOTS entry %v", addr, e)
		}
		lo, ok1 := f[0].(int64)
		hi, ok2 := f[1].(int64)
		m, ok3 := f[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(m) < 2 {
			return nil, fmt.Errorf("%s: malformed CLUSTER SLOTS entry %v", addr, e)
		}
		ip, _ := m[0].(string)
		port, _ := m[1].(int64)
		r := slotRange{Start: int(lo), End: int(hi)}
		if ip != "" && ip != "?" && port > 0 {
			r.Addr = ip + ":" + strconv.FormatInt(port, 10)
		}
		if len(m) > 2 {
			r.ID, _ = m[2].(string)
		}
		out = append(out, r)
	}
	return out, nil
}

// checkCoverage reports whether ranges cover every slot exactly once with a
// known master address, using exactly masters distinct masters.
func checkCoverage(ranges []slotRange, masters int) error {
	var seen [NumSlots]bool
	owners := map[string]bool{}
	covered := 0
	for _, r := range ranges {
		if r.Start < 0 || r.End >= NumSlots || r.Start > r.End {
			return fmt.Errorf("bad range %d-%d", r.Start, r.End)
		}
		if r.Addr == "" {
			return fmt.Errorf("slots %d-%d: master address not known yet", r.Start, r.End)
		}
		owners[r.Addr] = true
		for s := r.Start; s <= r.End; s++ {
			if seen[s] {
				return fmt.Errorf("slot %d listed twice", s)
			}
			seen[s] = true
			covered++
		}
	}
	if covered != NumSlots {
		return fmt.Errorf("%d of %d slots covered", covered, NumSlots)
	}
	if len(owners) != masters {
		return fmt.Errorf("%d distinct masters, want %d", len(owners), masters)
	}
	return nil
}

// MoveSlot migrates slot, with its keys, to the master Nodes[to], the way a resharding does:
// IMPORTING on the target, MIGRATING on the source, MIGRATE of its keys, then SETSLOT NODE on
// every master, target first. It returns once every node's CLUSTER SLOTS shows the move (or
// fails after 10s). Moving a slot to its owner changes nothing.
func (c *Cluster) MoveSlot(slot, to int) error {
	ranges, err := clusterSlots(c.Addrs[0])
	if err != nil {
		return err
	}
	var src string
	for _, r := range ranges {
		if r.Start <= slot && slot <= r.End {
			src = r.Addr
		}
	}
	dst := c.Addrs[to]
	if src == "" || src == dst {
		return nil
	}
	id := func(addr string) (string, error) {
		v, err := Do(addr, DefaultTimeout, "CLUSTER", "MYID")
		s, _ := v.(string)
		return s, err
	}
	srcID, err1 := id(src)
	dstID, err2 := id(dst)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	s := strconv.Itoa(slot)
	if _, err := Do(dst, DefaultTimeout, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID); err != nil {
		return err
	}
	if _, err := Do(src, DefaultTimeout, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID); err != nil {
		return err
	}
	host, port, _ := strings.Cut(dst, ":")
	for {
		v, err := Do(src, DefaultTimeout, "CLUSTER", "GETKEYSINSLOT", s, "100")
		if err != nil {
			return err
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}
		for _, k := range keys {
			ks, _ := k.(string)
			args = append(args, ks)
		}
		if _, err := Do(src, DefaultTimeout, args...); err != nil {
			return err
		}
	}
	order := []string{dst, src}
	for _, a := range c.Addrs {
		if a != dst && a != src {
			order = append(order, a)
		}
	}
	for _, a := range order {
		if _, err := Do(a, DefaultTimeout, "CLUSTER", "SETSLOT", s, "NODE", dstID); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		moved := true
		for _, a := range c.Addrs {
			rs, err := clusterSlots(a)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r.Start <= slot && slot <= r.End && r.Addr != dst {
					moved = false
				}
			}
		}
		if moved {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: slot %d not moved to %s on every node within 10s", slot, dst)
		}
	}
}
