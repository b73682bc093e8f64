// Tests of replica acknowledgement (WithReplicaAck) on a real master and replica, with a failover
// made by hand: the master killed, the link from the replica cut (a faultproxy between the two),
// the replica promoted with REPLICAOF NO ONE, and clients connecting to it.
package backend_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/conformance"
	"github.com/hashlock/locker/internal/testkit/faultproxy"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// pair is a master and a replica that replicates from it through a proxy, so the test can delay
// or cut the replication link.
type pair struct {
	master, replica *redistest.Server
	link            *faultproxy.Proxy
}

// startPair starts a master and a replica of it through a proxy, and returns once the replica
// reports its link up.
func startPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{master: startMaster(t)}
	p.link = faultproxy.Start(t, p.master.Addr)
	p.replica = startReplica(t, p.master, p.link.Addr())
	return p
}

// startMaster starts a server that syncs a new replica at once (by default a diskless sync
// waits 5s for more replicas to join).
func startMaster(t testing.TB) *redistest.Server {
	return redistest.StartServer(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
}

// startReplica starts a replica of master that connects to it at addr, and returns once both
// report the link up.
func startReplica(t testing.TB, master *redistest.Server, addr string) *redistest.Server {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	replica := redistest.StartServer(t, redistest.WithArgs("--replicaof", host, port))
	waitInfo(t, replica, "master_link_status:up")
	waitInfo(t, master, "connected_slaves:1")
	return replica
}

// waitInfo polls INFO replication of srv until it has the line want, for at most 10 seconds.
func waitInfo(t testing.TB, srv *redistest.Server, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := srv.Do(t, "INFO", "replication").(string)
		if strings.Contains(info, want+"\r\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in INFO replication after 10s:\n%s", srv.Addr, want, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failover kills the master, cuts the link (what the proxy still holds for the replica is
// lost, as it would be in the network) and promotes the replica.
func (p *pair) failover(t *testing.T) {
	t.Helper()
	p.link.Blackhole()
	p.master.Stop()
	p.replica.Do(t, "REPLICAOF", "NO", "ONE")
	waitInfo(t, p.replica, "role:master")
}

// exists reports whether key exists on srv.
func exists(t testing.TB, srv *redistest.Server, key string) bool {
	t.Helper()
	n, _ := srv.Do(t, "EXISTS", key).(int64)
	return n == 1
}

// With acknowledgement from the one replica, a lock (re-entered once) is on the replica when
// Lock returns, although the link delays everything by 100ms each way: after the master dies and
// the replica is promoted, the lock is held there, with both holds, and another owner is refused.
func TestReplicaAckSurvivesFailover(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			p := startPair(t)
			p.link.SetLatency(100 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := locker.New(d.new(t, p.master.Addr, rediscore.WithReplicaAck(1, 5*time.Second)))
			defer c.Close()
			outer, err := c.Lock(ctx, "failover")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Lock(outer.Context(), "failover"); err != nil {
				t.Fatal(err)
			}
			p.failover(t)

			promoted := locker.New(d.new(t, p.replica.Addr))
			defer promoted.Close()
			st, err := promoted.Inspect(ctx, "failover")
			if err != nil {
				t.Fatal(err)
			}
			if !st.Locked || st.Holds != 2 || st.TTL <= 0 {
				t.Fatalf("on the promoted replica: %+v, want locked with 2 holds and a lease", st)
			}
			if _, err := promoted.TryLock(ctx, "failover"); !errors.Is(err, locker.ErrNotObtained) {
				t.Fatalf("TryLock by another owner on the promoted replica = %v, want ErrNotObtained", err)
			}
		})
	}
}

// Without acknowledgement a lock granted by the master while replication is stalled is lost in
// a failover: another owner gets it from the promoted replica while the first still holds its
// lease. This is the case that WithReplicaAck is for.
func TestWithoutReplicaAckFailoverLosesLock(t *testing.T) {
	p := startPair(t)
	p.link.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := drivers[0]
	c := locker.New(d.new(t, p.master.Addr))
	defer c.Close()
	held, err := c.Lock(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	p.failover(t)

	other := locker.New(d.new(t, p.replica.Addr))
	defer other.Close()
	l, err := other.TryLock(ctx, "lost")
	if err != nil {
		t.Fatalf("TryLock on the promoted replica = %v; the unreplicated lock survived", err)
	}
	defer l.Unlock()
	if held.Context().Err() != nil {
		t.Fatal("the first holder's lease ended already: the test shows nothing")
	}
}

// With the replication link cut, an acquire is never acknowledged: TryLock fails with
// ErrUnavailable and ErrNotReplicated and has taken the acquire back when it returns; Lock keeps
// trying until its ctx ends and leaves nothing behind. An acquire or a release sent again (same
// request ID, as after a lost reply) is not reported as replicated just because its connection
// wrote nothing before.
func TestReplicaAckNotReplicated(t *testing.T) {
	p := startPair(t)
	p.link.Blackhole()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := d.new(t, p.master.Addr, rediscore.WithReplicaAck(1, 100*time.Millisecond))
			c := locker.New(b)
			defer c.Close()

			key := "unreplicated:" + d.name
			_, err := c.TryLock(ctx, key)
			if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, rediscore.ErrNotReplicated) {
				t.Fatalf("TryLock = %v, want ErrUnavailable and ErrNotReplicated", err)
			}
			if exists(t, p.master, key) {
				t.Fatal("TryLock returned with the unreplicated lock still on the master")
			}

			short, cancelShort := context.WithTimeout(ctx, 600*time.Millisecond)
			defer cancelShort()
			start := time.Now()
			_, err = c.Lock(short, key)
			// Usually a *NotObtainedError (ErrNotObtained); when the driver's I/O deadline fires
			// just before the ctx's timer (Redigo), the acquire's error.
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock = %v, want DeadlineExceeded", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("Lock with a 600ms ctx took %v", took)
			}
			// An attempt cut short by the ctx is taken back in the background (Client.abandon).
			for deadline := time.Now().Add(5 * time.Second); exists(t, p.master, key); {
				if time.Now().After(deadline) {
					t.Fatal("the lock was still on the master 5s after Lock returned")
				}
				time.Sleep(10 * time.Millisecond)
			}

			// Replays: the first send (here without acknowledgement) took effect, its reply was
			// lost, and it is sent again on a connection that has written nothing yet (a new
			// backend's). WAIT covers the writes of its connection (by its documentation; Redis
			// 7.0 counts from the server's offset at the connection's last command, whatever it
			// was), so the replayed script writes, and the replica is not counted.
			plain := d.new(t, p.master.Addr)
			replay := func() locker.Locker {
				return d.new(t, p.master.Addr, rediscore.WithReplicaAck(1, 100*time.Millisecond))
			}
			req := locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute, ID: "replayed-acquire"}
			if a, err := plain.Acquire(ctx, req); err != nil || !a.Acquired() {
				t.Fatalf("first acquire = %+v, %v", a, err)
			}
			if _, err := replay().Acquire(ctx, req); !errors.Is(err, rediscore.ErrNotReplicated) {
				t.Fatalf("acquire sent again = %v, want ErrNotReplicated", err)
			}
			if exists(t, p.master, key) {
				t.Fatal("the replayed acquire was not taken back")
			}
			if a, err := plain.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute}); err != nil || !a.Acquired() {
				t.Fatalf("acquire = %+v, %v", a, err)
			}
			rel := locker.ReleaseRequest{Key: key, Owner: "o", ID: "replayed-release"}
			if n, err := plain.Release(ctx, rel); err != nil || n != 0 {
				t.Fatalf("first release = %d, %v", n, err)
			}
			if _, err := replay().Release(ctx, rel); !errors.Is(err, rediscore.ErrNotReplicated) {
				t.Fatalf("release sent again = %v, want ErrNotReplicated", err)
			}
		})
	}
}

// With the replica gone, Unlock returns an error wrapping ErrUnavailable and ErrNotReplicated
// (after sending the release 3 times), but the master has released: a release cannot be taken
// back (another owner may have the lock already), and losing it in a failover only leaves the
// lock to expire.
func TestReplicaAckReleaseReplicaDown(t *testing.T) {
	p := startPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leases := make([]*locker.Lease, len(drivers))
	for i, d := range drivers {
		c := locker.New(d.new(t, p.master.Addr, rediscore.WithReplicaAck(1, 100*time.Millisecond)))
		defer c.Close()
		l, err := c.Lock(ctx, "release:"+d.name)
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		leases[i] = l
	}
	p.replica.Stop()
	waitInfo(t, p.master, "connected_slaves:0")
	for i, d := range drivers {
		err := leases[i].Unlock()
		if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, rediscore.ErrNotReplicated) {
			t.Errorf("%s: Unlock without replica = %v, want ErrUnavailable and ErrNotReplicated", d.name, err)
		}
		if exists(t, p.master, "release:"+d.name) {
			t.Errorf("%s: the master still has the lock after Unlock", d.name)
		}
	}
}

// An invalid WithReplicaAck makes every call of each driver's backend fail with ErrInvalid.
func TestReplicaAckInvalidOptions(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, d := range drivers {
		for _, opt := range []rediscore.Option{rediscore.WithReplicaAck(0, time.Second), rediscore.WithReplicaAck(1, 0), nil} {
			c := locker.New(d.new(t, srv.Addr, opt))
			_, err := c.Lock(ctx, "invalid")
			c.Close()
			if !errors.Is(err, locker.ErrInvalid) {
				t.Fatalf("%s: Lock = %v, want ErrInvalid", d.name, err)
			}
		}
	}
	if exists(t, srv, "invalid") {
		t.Fatal("an invalid backend reached the server")
	}
}

// On a cluster (masters without replicas, so no acknowledgement ever comes) the script and WAIT
// go to the master of the key's slot: the acquire is refused as not replicated, not redirected,
// and taken back there. When the slot has moved since the client loaded its slot map, the
// MOVED reply is an ErrUnavailable, and once the client has the new map the call goes to the new
// master.
func TestReplicaAckCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	clients := clusterDrivers(cluster)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range clients {
		b := d.new(t, "", rediscore.WithReplicaAck(1, 50*time.Millisecond))
		key := "cluster:" + d.name
		_, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute, ID: "a"})
		if !errors.Is(err, rediscore.ErrNotReplicated) {
			t.Fatalf("%s: Acquire = %v, want ErrNotReplicated", d.name, err)
		}
		if owner := slotOwner(t, cluster, key); exists(t, owner, key) {
			t.Fatalf("%s: the acquire was not taken back", d.name)
		}

		// A key of another slot, untouched so far, moves to another master.
		moving := "moving:" + d.name
		from := slotOwner(t, cluster, moving)
		to := cluster.Nodes[0]
		if to == from {
			to = cluster.Nodes[1]
		}
		moveSlot(t, cluster, rediscore.Slot(moving), from, to)
		_, err = b.Acquire(ctx, locker.AcquireRequest{Key: moving, Owner: "o", TTL: time.Minute})
		if !errors.Is(err, locker.ErrUnavailable) || !strings.Contains(err.Error(), "MOVED") {
			t.Fatalf("%s: Acquire right after the slot moved = %v, want ErrUnavailable for MOVED", d.name, err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			_, err = b.Acquire(ctx, locker.AcquireRequest{Key: moving, Owner: "o", TTL: time.Minute})
			if errors.Is(err, rediscore.ErrNotReplicated) {
				break
			}
			if !errors.Is(err, locker.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("%s: Acquire after the slot moved = %v, want ErrNotReplicated within 10s", d.name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// slotOwner returns the node of cluster that serves key: the one that does not redirect a GET.
func slotOwner(t *testing.T, cluster *redistest.Cluster, key string) *redistest.Server {
	t.Helper()
	for _, n := range cluster.Nodes {
		if _, err := redistest.Do(n.Addr, 0, "GET", key); err == nil {
			return n
		}
	}
	t.Fatalf("no node serves %q", key)
	return nil
}

// moveSlot moves the empty slot from one master to another, the way a resharding does.
func moveSlot(t *testing.T, cluster *redistest.Cluster, slot uint16, from, to *redistest.Server) {
	t.Helper()
	id := func(n *redistest.Server) string { s, _ := n.Do(t, "CLUSTER", "MYID").(string); return s }
	s := strconv.Itoa(int(slot))
	to.Do(t, "CLUSTER", "SETSLOT", s, "IMPORTING", id(from))
	from.Do(t, "CLUSTER", "SETSLOT", s, "MIGRATING", id(to))
	for _, n := range append([]*redistest.Server{to, from}, cluster.Nodes...) {
		n.Do(t, "CLUSTER", "SETSLOT", s, "NODE", id(to))
	}
}

// The conformance suite passes unchanged with acknowledgement from a replica on loopback. Its
// TTL is 1s rather than 400ms: every Lock and Unlock now waits for the replica too, and the
// timed properties allow only TTL/20 for delays.
func TestConformanceReplicaAck(t *testing.T) {
	p := startPair(t)
	conformance.Run(t, conformance.Factory{
		TTL: time.Second,
		New: func(t conformance.TB) locker.Locker {
			return drivers[0].new(t, p.master.Addr, rediscore.WithReplicaAck(1, time.Second))
		},
	})
}

// The cost of acknowledgement: Lock+Unlock on a master with one replica (directly connected, on
// loopback), without and with WithReplicaAck(1, 1s), for each driver.
func BenchmarkReplicaAck(b *testing.B) {
	master := startMaster(b)
	startReplica(b, master, master.Addr)
	for _, d := range drivers {
		for _, ack := range []bool{false, true} {
			name, opts := d.name+"/no-ack", []rediscore.Option(nil)
			if ack {
				name, opts = d.name+"/ack", []rediscore.Option{rediscore.WithReplicaAck(1, time.Second)}
			}
			b.Run(name, func(b *testing.B) {
				c := locker.New(d.new(b, master.Addr, opts...))
				defer c.Close()
				ctx := context.Background()
				for b.Loop() {
					l, err := c.Lock(ctx, "bench")
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Unlock(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Renewals wait for the replicas too: with the replication link cut, they are not acknowledged,
// so the holder's lease context ends (ErrLockLost) within about a TTL, while the lease the
// replica last saw may run out; the master still has the hold, renewed but unconfirmed. Without
// acknowledgement the lease would go on, and after a failover the promoted replica would free
// the key while the holder still works under it.
func TestReplicaAckRenewalsUnconfirmedEndLease(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			p := startPair(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const ttl = 600 * time.Millisecond
			c := locker.New(d.new(t, p.master.Addr, rediscore.WithReplicaAck(1, 50*time.Millisecond)), locker.WithTTL(ttl))
			defer c.Close()
			l, err := c.Lock(ctx, "renewals")
			if err != nil {
				t.Fatal(err)
			}
			cut := time.Now()
			p.link.Blackhole()
			select {
			case <-l.Context().Done():
			case <-time.After(2 * ttl):
				t.Fatalf("the lease context was live %v after replication stopped (TTL %v)", 2*ttl, ttl)
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
				t.Fatalf("the lease ended with %v, want ErrLockLost", cause)
			}
			if d := time.Since(cut); d > ttl+ttl/2 {
				t.Fatalf("the lease ended %v after replication stopped, want within about a TTL (%v)", d, ttl)
			}
			if !exists(t, p.master, "renewals") {
				t.Fatal("the master lost the hold: the lease should have ended for want of acknowledgement only")
			}
		})
	}
}
