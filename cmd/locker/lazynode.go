package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// redialEvery is how often a lazyNode tries its server again while it is down.
const redialEvery = time.Second

// A lazyNode is a quorum node whose server did not answer at the start. It tries to connect
// again at a call (at most once per redialEvery); until it succeeds, every call fails with an
// error wrapping locker.ErrUnavailable, which the quorum counts as a node that is down.
type lazyNode struct {
	url  string // redacted, for messages
	dial func(ctx context.Context) (*conn, error)

	mu      sync.Mutex
	cn      *conn     // nil until a dial succeeds
	lastErr error     // why the last dial failed
	next    time.Time // no dial before this (set when a dial starts, and when it fails)
	closed  bool
}

var (
	_ locker.Locker      = (*lazyNode)(nil)
	_ locker.FenceRaiser = (*lazyNode)(nil)
)

// node returns the node's Locker, dialing it if it is time to try again. The dial runs outside
// the lock, so calls made meanwhile fail at once instead of waiting for it, and in a goroutine
// of its own, so that a call returns when its ctx ends even if the driver's dial does not (the
// dial is bounded by connectTimeout, and its result is kept for the next call).
func (n *lazyNode) node(ctx context.Context) (*conn, error) {
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		return nil, display.Errorf("%s: %w", n.url, locker.ErrClosed)
	case n.cn != nil:
		defer n.mu.Unlock()
		return n.cn, nil
	case time.Now().Before(n.next):
		defer n.mu.Unlock()
		return nil, display.Errorf("%s: %w: %w", n.url, locker.ErrUnavailable, n.lastErr)
	}
	n.next = time.Now().Add(redialEvery)
	n.mu.Unlock()

	dialed := make(chan error, 1)
	go func() { dialed <- n.redial(context.WithoutCancel(ctx)) }()
	select {
	case err := <-dialed:
		if err != nil {
			return nil, display.Errorf("%s: %w: %w", n.url, locker.ErrUnavailable, err)
		}
		return n.node(ctx) // connected, or closed meanwhile
	case <-ctx.Done():
		return nil, display.Errorf("%s: %w: %w", n.url, locker.ErrUnavailable, ctx.Err())
	}
}

// redial dials the server and keeps the connection (or closes it if the node was closed
// meanwhile).
func (n *lazyNode) redial(ctx context.Context) error {
	cn, err := n.dial(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case err != nil:
		n.lastErr, n.next = err, time.Now().Add(redialEvery)
	case n.closed:
		cn.close()
	default:
		n.cn = cn
	}
	return err
}

func (n *lazyNode) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.cn != nil {
		n.cn.close()
	}
}

func (n *lazyNode) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	cn, err := n.node(ctx)
	if err != nil {
		return locker.Acquisition{}, err
	}
	return cn.Acquire(ctx, req)
}

func (n *lazyNode) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	cn, err := n.node(ctx)
	if err != nil {
		return 0, err
	}
	return cn.Release(ctx, req)
}

func (n *lazyNode) Renew(ctx context.Context, batch []locker.Renewal) []error {
	cn, err := n.node(ctx)
	if err != nil {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return cn.Renew(ctx, batch)
}

func (n *lazyNode) Inspect(ctx context.Context, key string) (locker.State, error) {
	cn, err := n.node(ctx)
	if err != nil {
		return locker.State{}, err
	}
	return cn.Inspect(ctx, key)
}

func (n *lazyNode) ForceRelease(ctx context.Context, key string) (bool, error) {
	cn, err := n.node(ctx)
	if err != nil {
		return false, err
	}
	return cn.ForceRelease(ctx, key)
}

func (n *lazyNode) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	cn, err := n.node(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cn.Subscribe(ctx, key)
}

func (n *lazyNode) RaiseFence(ctx context.Context, key string, token uint64) error {
	cn, err := n.node(ctx)
	if err != nil {
		return err
	}
	fr, ok := cn.Locker.(locker.FenceRaiser)
	if !ok {
		return display.Errorf("%s: RaiseFence: %w", n.url, errors.ErrUnsupported)
	}
	return fr.RaiseFence(ctx, key, token)
}
