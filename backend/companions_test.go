// Tests of a lock's companion keys on real servers (their names: backend/rediscore/keys.go): a
// user's key named like a companion is refused before anything is written, and a long key's
// request marker stays small.
package backend_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/rediscore"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A userValue is a value of somebody else's at a companion's name: not a number the scripts wrote.
type userValue struct {
	name  string
	write []string // the command that writes it at the key, after the key
	read  []string // the command that reads it back, after the key
}

var userValues = []userValue{
	{"hash", []string{"HSET", "f", "v"}, []string{"HGETALL"}},
	{"string", []string{"SET", "not a number"}, []string{"GET"}},
}

// onServer runs commands on the server, or on a cluster's master, that serves a key.
type onServer func(key string, args ...string) (any, error)

// plant writes v at name and returns a check that it is still there, unchanged and without a TTL.
func plant(t *testing.T, do onServer, v userValue, name string) (unchanged func(what string)) {
	t.Helper()
	if _, err := do(name, append([]string{v.write[0], name}, v.write[1:]...)...); err != nil {
		t.Fatal(err)
	}
	read := func() any {
		got, err := do(name, append([]string{v.read[0], name}, v.read[1:]...)...)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := read()
	return func(what string) {
		t.Helper()
		if got := read(); !reflect.DeepEqual(got, want) {
			t.Errorf("after %s: the user's %s at %q is %v, want %v", what, v.name, name, got, want)
		}
		if ttl, err := do(name, "PTTL", name); err != nil || ttl != int64(-1) {
			t.Errorf("after %s: the user's %s at %q has PTTL %v (%v), want -1", what, v.name, name, ttl, err)
		}
	}
}

// existsOn reports whether key is on the server.
func existsOn(t *testing.T, do onServer, key string) bool {
	t.Helper()
	n, err := do(key, "EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	return n != int64(0)
}

// companionsOfOthers checks, for a backend of d, that a user's value at a lock's fencing counter
// or request marker makes every call that would write it fail with ErrNotALock, and that the
// call wrote nothing: not the lock, not the user's value.
func companionsOfOthers(t *testing.T, d driver, addr string, do onServer) {
	b := d.new(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	notALock := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, locker.ErrNotALock) {
			t.Errorf("%s: %v, want an error wrapping ErrNotALock", what, err)
		}
	}
	for _, v := range userValues {
		// The fencing counter: a fenced Lock, with a random owner and with WithOwner, and RaiseFence.
		key := fmt.Sprintf("companions:%s:fence:%s", d.name, v.name)
		unchanged := plant(t, do, v, rediscore.FenceKey(key))
		c := locker.New(b, locker.WithFencing())
		defer c.Close()
		for _, opts := range [][]locker.Option{nil, {locker.WithOwner("shared")}} {
			l, err := c.Lock(ctx, key, opts...)
			if err == nil {
				_ = l.Unlock()
			}
			what := fmt.Sprintf("fenced Lock with %d options, %s at the counter", len(opts), v.name)
			notALock(what, err)
			if existsOn(t, do, key) {
				t.Errorf("%s: the lock %s was written", what, key)
			}
			unchanged(what)
		}
		err := b.(locker.FenceRaiser).RaiseFence(ctx, key, 1<<60)
		notALock("RaiseFence, "+v.name+" at the counter", err)
		unchanged("RaiseFence")

		// A request marker: an acquire with an ID (a re-entry's), a release with an ID, and the
		// Client's Unlock, whose request ID the test learns as the release is sent.
		key = fmt.Sprintf("companions:%s:marker:%s", d.name, v.name)
		unchanged = plant(t, do, v, rediscore.MarkerKey(key, "r1"))
		_, err = b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute, ID: "r1"})
		notALock("Acquire with a request ID, "+v.name+" at its marker", err)
		if existsOn(t, do, key) {
			t.Errorf("Acquire with a request ID, %s at its marker: the lock %s was written", v.name, key)
		}
		unchanged("Acquire")
		if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		_, err = b.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "o", ID: "r1"})
		notALock("Release with a request ID, "+v.name+" at its marker", err)
		unchanged("Release")
		if st, err := b.Inspect(ctx, key); err != nil || st.Holds != 1 {
			t.Errorf("after a refused Release: %+v, %v; want the one hold", st, err)
		}

		// The wait queue: a reader, a writer that waits and a fair TryLock read it, a refused
		// writer would write it; Inspect and Dequeue read it.
		key = fmt.Sprintf("companions:%s:queue:%s", d.name, v.name)
		unchanged = plant(t, do, v, rediscore.QueueKey(key))
		_, err = c.TryRLock(ctx, key)
		notALock("TryRLock, "+v.name+" at the queue", err)
		_, err = c.TryLock(ctx, key, locker.WithFair())
		notALock("fair TryLock, "+v.name+" at the queue", err)
		if existsOn(t, do, key) {
			t.Errorf("TryRLock, %s at the queue: the lock %s was written", v.name, key)
		}
		if _, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		_, err = b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute, Wait: time.Minute})
		notALock("a refused Acquire that waits, "+v.name+" at the queue", err)
		_, err = b.Inspect(ctx, key)
		notALock("Inspect, "+v.name+" at the queue", err)
		err = b.(locker.KindLocker).Dequeue(ctx, key, "w")
		notALock("Dequeue, "+v.name+" at the queue", err)
		_, err = b.(locker.HandOffer).HandOff(ctx, locker.HandOffRequest{Key: key, From: "o", To: "t", TTL: time.Minute})
		notALock("HandOff, "+v.name+" at the queue", err)
		unchanged("the queue's readers and writers")
		if a, err := b.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute, Reentry: true}); err != nil || a.Holds != 2 {
			t.Errorf("after the refused HandOff, %s at the queue: the giver re-enters = %+v, %v; want its second hold", v.name, a, err)
		}
		if err := b.Renew(ctx, []locker.Renewal{{Key: key, Owner: "o", TTL: time.Minute}})[0]; err != nil {
			t.Errorf("Renew of the lock, %s at its queue: %v, want renewed", v.name, err)
		}

		key = fmt.Sprintf("companions:%s:unlock:%s", d.name, v.name)
		p := &plantOnRelease{Locker: b, plant: func(name string) { unchanged = plant(t, do, v, name) }}
		pc := locker.New(p)
		defer pc.Close()
		l, err := pc.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		notALock("Unlock, "+v.name+" at its marker", l.Unlock())
		if p.planted == 0 {
			t.Fatal("Unlock sent no release with a request ID")
		}
		unchanged("Unlock")
		if st, err := b.Inspect(ctx, key); err != nil || st.Holds != 1 {
			t.Errorf("after a refused Unlock: %+v, %v; want the one hold", st, err)
		}
	}
}

// plantOnRelease is a backend that, before each release with a request ID, plants a user's value
// at that request's marker.
type plantOnRelease struct {
	locker.Locker
	plant   func(name string)
	planted int
}

func (p *plantOnRelease) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if req.ID != "" {
		p.plant(rediscore.MarkerKey(req.Key, req.ID))
		p.planted++
	}
	return p.Locker.Release(ctx, req)
}

// Issue 12, item 5: a user's key at a companion's name is left as it is, and so is the lock,
// on every driver, on a server and on a cluster.
func TestCompanionsOfOthers(t *testing.T) {
	srv := redistest.StartServer(t)
	onSrv := func(_ string, args ...string) (any, error) { return redistest.Do(srv.Addr, 0, args...) }
	forEachDriver(t, func(t *testing.T, d driver) { companionsOfOthers(t, d, srv.Addr, onSrv) })

	cluster := redistest.StartCluster(t, 3)
	for _, d := range clusterDrivers(cluster) {
		t.Run("cluster-"+d.name, func(t *testing.T) { companionsOfOthers(t, d, "", cluster.DoKey) })
	}
}

// Issue 12, item 7: the request markers of a 64 KiB key (those of a re-entry, of the Unlock
// that leaves the outer hold, and of the last Unlock, which lives only until that Unlock's
// deadline; a plain Lock leaves none), and its fencing counter, are small (the README: about
// 150 bytes), on every driver.
func TestLongKeysCompanionsAreSmall(t *testing.T) {
	srv := redistest.StartServer(t)
	forEachDriver(t, func(t *testing.T, d driver) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key := d.name + ":"
		key += strings.Repeat("k", locker.MaxKeyLen-len(key))
		c := locker.New(d.new(t, srv.Addr), locker.WithFencing())
		defer c.Close()
		l, err := c.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := c.Lock(l.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(inner.Unlock(), l.Unlock()); err != nil {
			t.Fatal(err)
		}
		var companions []string
		for _, k := range scanKeys(t, srv, d.name+":*") {
			if k == key {
				t.Fatalf("the lock %.20s… is still there after Unlock", key)
			}
			companions = append(companions, k)
		}
		if len(companions) != 4 { // the fencing counter, the re-entry's and both releases' markers
			t.Fatalf("companions of the long key: %.200q, want the counter and three markers", companions)
		}
		for _, k := range companions {
			size, _ := srv.Do(t, "MEMORY", "USAGE", k).(int64)
			t.Logf("%d-byte name, MEMORY USAGE %d bytes: %.120q", len(k), size, k)
			if size <= 0 || size >= 300 {
				t.Errorf("companion %.120q: MEMORY USAGE %d bytes, want under 300", k, size)
			}
		}
	})
}

// scanKeys returns the keys of srv that match pattern, by SCAN.
func scanKeys(t *testing.T, srv *redistest.Server, pattern string) []string {
	t.Helper()
	var keys []string
	cursor := "0"
	for {
		r, _ := srv.Do(t, "SCAN", cursor, "MATCH", pattern, "COUNT", "1000").([]any)
		if len(r) != 2 {
			t.Fatalf("SCAN: %v", r)
		}
		cursor, _ = r[0].(string)
		batch, _ := r[1].([]any)
		for _, k := range batch {
			s, _ := k.(string)
			keys = append(keys, s)
		}
		if cursor == "0" {
			return keys
		}
	}
}
