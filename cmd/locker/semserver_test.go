//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"net/url"
	"sync"
	"testing"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/rediscore"
)

// A stand-in server, for the tests of locker run --limit and of locker inspect and unlock on
// semaphores: a memory backend (a locker.Semaphorer) served over net/rpc on a loopback port,
// and the locker.Semaphorer that its URL, memtest://127.0.0.1:PORT, connects to in every process
// of the test binary (standIn). A Redis backend that is a Semaphorer is tested on miniredis and
// redis-server as well (semServers); the stand-in lets the command's semaphores be tested
// across processes whatever the Redis backends implement. It has no release notices: waiters
// poll, on the Client's timers.

// memScheme is the scheme of the stand-in's URLs.
const memScheme = "memtest"

func init() { standIn = dialMem }

// startMemServer serves a fresh memory backend until the end of the test and returns its URL.
func startMemServer(t *testing.T) string {
	t.Helper()
	srv := rpc.NewServer()
	if err := srv.RegisterName("Mem", &memService{b: memory.New()}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for { // rpc.Server.Accept would log the error of the listener closed at the end
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { srv.ServeConn(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return memScheme + "://" + ln.Addr().String()
}

// memService is the server side: each method is one call of the memory backend, with its
// error carried as a WireErr. net/rpc serves only methods whose argument and reply types are
// exported, hence the exported names of these types of package main.
type memService struct{ b *memory.Backend }

// WireErr is an error on the wire: its text and the sentinel it wraps (an index of sentinels,
// -1 for none); the zero-length text is no error.
type WireErr struct {
	Msg  string
	Kind int
}

// sentinels are the errors that a WireErr keeps for errors.Is.
var sentinels = []error{locker.ErrNotHeld, locker.ErrInvalid, locker.ErrNotALock, locker.ErrUpgrade,
	locker.ErrLimitMismatch, locker.ErrUnavailable, errors.ErrUnsupported, context.Canceled, context.DeadlineExceeded}

func toWire(err error) WireErr {
	if err == nil {
		return WireErr{}
	}
	for i, s := range sentinels {
		if errors.Is(err, s) {
			return WireErr{err.Error(), i}
		}
	}
	return WireErr{err.Error(), -1}
}

// remoteErr is a WireErr back as an error.
type remoteErr struct {
	msg  string
	kind error // nil for none
}

func (e *remoteErr) Error() string { return e.msg }
func (e *remoteErr) Unwrap() error { return e.kind }

func (w WireErr) err() error {
	switch {
	case w.Msg == "":
		return nil
	case w.Kind >= 0 && w.Kind < len(sentinels):
		return &remoteErr{w.Msg, sentinels[w.Kind]}
	}
	return &remoteErr{msg: w.Msg}
}

type AcquireReply struct {
	A   locker.Acquisition
	Err WireErr
}

func (s *memService) Acquire(req locker.AcquireRequest, reply *AcquireReply) error {
	a, err := s.b.Acquire(context.Background(), req)
	*reply = AcquireReply{a, toWire(err)}
	return nil
}

type ReleaseReply struct {
	Left int
	Err  WireErr
}

func (s *memService) Release(req locker.ReleaseRequest, reply *ReleaseReply) error {
	left, err := s.b.Release(context.Background(), req)
	*reply = ReleaseReply{left, toWire(err)}
	return nil
}

func (s *memService) Renew(batch []locker.Renewal, reply *[]WireErr) error {
	for _, err := range s.b.Renew(context.Background(), batch) {
		*reply = append(*reply, toWire(err))
	}
	return nil
}

type InspectReply struct {
	St  locker.State
	Err WireErr
}

func (s *memService) Inspect(key string, reply *InspectReply) error {
	st, err := s.b.Inspect(context.Background(), key)
	*reply = InspectReply{st, toWire(err)}
	return nil
}

type ForceReply struct {
	Removed bool
	Err     WireErr
}

func (s *memService) ForceRelease(key string, reply *ForceReply) error {
	removed, err := s.b.ForceRelease(context.Background(), key)
	*reply = ForceReply{removed, toWire(err)}
	return nil
}

type DequeueArgs struct{ Key, Owner string }

func (s *memService) Dequeue(args DequeueArgs, reply *WireErr) error {
	*reply = toWire(s.b.Dequeue(context.Background(), args.Key, args.Owner))
	return nil
}

// dialMem is standIn: it connects to the stand-in at a memtest:// URL, and leaves other URLs.
func dialMem(ctx context.Context, raw string) (*conn, bool, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != memScheme {
		return nil, false, nil
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, true, fmt.Errorf("memtest: %w: %w", locker.ErrUnavailable, err)
	}
	rc := rpc.NewClient(nc)
	return &conn{Locker: &memClient{rc}, desc: "the memory backend of the test at " + u.Host, close: func() { rc.Close() }}, true, nil
}

// memClient is the stand-in's locker.Semaphorer: every call is one round trip, bounded by ctx.
type memClient struct{ rc *rpc.Client }

var _ locker.Semaphorer = (*memClient)(nil)

// call calls method with args and waits for reply, or for ctx's end.
func (m *memClient) call(ctx context.Context, method string, args, reply any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := m.rc.Go("Mem."+method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-c.Done:
		if c.Error != nil {
			return fmt.Errorf("memtest: %s: %w: %w", method, locker.ErrUnavailable, c.Error)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *memClient) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	var r AcquireReply
	if err := m.call(ctx, "Acquire", req, &r); err != nil {
		return locker.Acquisition{}, err
	}
	return r.A, r.Err.err()
}

func (m *memClient) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	var r ReleaseReply
	if err := m.call(ctx, "Release", req, &r); err != nil {
		return 0, err
	}
	return r.Left, r.Err.err()
}

func (m *memClient) Renew(ctx context.Context, batch []locker.Renewal) []error {
	var r []WireErr
	err := m.call(ctx, "Renew", batch, &r)
	errs := make([]error, len(batch))
	for i := range errs {
		switch {
		case err != nil:
			errs[i] = err
		case i < len(r):
			errs[i] = r[i].err()
		default:
			errs[i] = fmt.Errorf("memtest: renew: %d results for %d entries: %w", len(r), len(batch), locker.ErrUnavailable)
		}
	}
	return errs
}

func (m *memClient) Inspect(ctx context.Context, key string) (locker.State, error) {
	var r InspectReply
	if err := m.call(ctx, "Inspect", key, &r); err != nil {
		return locker.State{}, err
	}
	return r.St, r.Err.err()
}

func (m *memClient) ForceRelease(ctx context.Context, key string) (bool, error) {
	var r ForceReply
	if err := m.call(ctx, "ForceRelease", key, &r); err != nil {
		return false, err
	}
	return r.Removed, r.Err.err()
}

// Subscribe has no notices to give: waiters poll.
func (m *memClient) Subscribe(context.Context, string) (<-chan struct{}, func(), error) {
	return nil, nil, fmt.Errorf("memtest: no release notices: %w", errors.ErrUnsupported)
}

func (m *memClient) Dequeue(ctx context.Context, key, owner string) error {
	var r WireErr
	if err := m.call(ctx, "Dequeue", DequeueArgs{key, owner}, &r); err != nil {
		return err
	}
	return r.err()
}

func (m *memClient) MaxLimit() int { return memory.MaxLimit }

// onEachSemServer runs f as a parallel subtest on each server with semaphores, with the URL of a
// server of its own: the stand-in (semserver_test.go), and miniredis and redis-server when the
// Redis backends (rediscore's, behind every driver) are locker.Semaphorers; until they are, their
// subtests are skipped.
func onEachSemServer(t *testing.T, f func(t *testing.T, url string)) {
	_, redisSems := locker.Locker((*rediscore.Backend)(nil)).(locker.Semaphorer)
	for _, srv := range append([]server{{memScheme, startMemServer}}, servers...) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			if srv.name != memScheme && !redisSems {
				t.Skip("the Redis backends are no locker.Semaphorer yet: no semaphores on", srv.name)
			}
			f(t, srv.start(t))
		})
	}
}
