package redistest

import (
	"fmt"
	"net"
	"reflect"
	"time"

	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
)

// foreignKinds are values a user may keep at a key that the lock's scripts must leave alone:
// other types, a hash that looks like a lock (one owner field, a count, a lease) but has no
// lock marker, and a hash with an empty field that is not the marker. K stands for the key.
var foreignKinds = []struct {
	write [][]string
	read  []string
}{
	{write: [][]string{{"RPUSH", "K", "a", "b"}}, read: []string{"LRANGE", "K", "0", "-1"}},
	{write: [][]string{{"SET", "K", "v"}}, read: []string{"GET", "K"}},
	{write: [][]string{{"HSET", "K", "owner", "1"}, {"PEXPIRE", "K", "600000"}}, read: []string{"HGETALL", "K"}},
	{write: [][]string{{"HSET", "K", "", "other", "f", "1"}}, read: []string{"HGETALL", "K"}},
	{write: [][]string{{"SADD", "K", "m"}}, read: []string{"SMEMBERS", "K"}},
}

// Foreign returns a conformance.Factory.Foreign for a Redis backend whose server (or servers:
// do may send the command to each node of a quorum and return their replies) do sends a command
// to: it stores values of other types, and hashes that are not locks.
func Foreign(do func(args ...string) (any, error)) func(t conformance.TB, key string, i int) func() bool {
	return func(t conformance.TB, key string, i int) func() bool {
		if i >= len(foreignKinds) {
			return nil
		}
		kind := foreignKinds[i]
		withKey := func(args []string) []string {
			out := append([]string(nil), args...)
			out[1] = key
			return out
		}
		for _, w := range kind.write {
			if _, err := do(withKey(w)...); err != nil {
				t.Fatalf("store foreign value %d at %q: %v", i, key, err)
			}
		}
		first, err := do(withKey(kind.read)...)
		if err != nil || first == nil {
			t.Fatalf("read foreign value %d at %q: %v, %v", i, key, first, err)
		}
		return func() bool {
			now, err := do(withKey(kind.read)...)
			return err == nil && reflect.DeepEqual(now, first)
		}
	}
}

// DoDial sends one command on a new connection from dial (a miniredis's in-memory Dial) and
// reads its reply, as Do does.
func DoDial(dial func() (net.Conn, error), args ...string) (any, error) {
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return DoConn(conn, time.Now().Add(DefaultTimeout), args...)
}

// DoKey sends one command about key to the master that serves key's slot.
func (c *Cluster) DoKey(key string, args ...string) (any, error) {
	ranges, err := clusterSlots(c.Addrs[0])
	if err != nil {
		return nil, err
	}
	slot := int(rediscore.Slot(key))
	for _, r := range ranges {
		if r.Start <= slot && slot <= r.End {
			return Do(r.Addr, 0, args...)
		}
	}
	return nil, fmt.Errorf("redistest: no master serves slot %d", slot)
}

// Foreign is the conformance.Factory.Foreign of a backend on this server.
func (s *Server) Foreign() func(t conformance.TB, key string, i int) func() bool {
	return Foreign(func(args ...string) (any, error) { return Do(s.Addr, 0, args...) })
}

// Foreign is the conformance.Factory.Foreign of a backend on this cluster.
func (c *Cluster) Foreign() func(t conformance.TB, key string, i int) func() bool {
	return Foreign(func(args ...string) (any, error) { return c.DoKey(args[1], args...) })
}
