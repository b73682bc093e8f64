package locker

import (
	"context"
	"sync"
	"time"
)

// callSet is the set of a Client's calls under way (Lock, TryLock, Inspect, ForceUnlock): Close
// cancels their contexts, so that a call waiting for the backend ends at once.
type callSet struct {
	base context.Context // the Client's, which Close cancels first: the end of a call whose ctx has none

	mu      sync.Mutex
	closed  bool
	next    uint64
	cancels map[uint64]context.CancelFunc
}

// begin returns a ctx for one call's backend calls: ctx, ending also at close. Pass id and
// cancel to end when the call is done. A ctx that never ends (Done is nil: Background, TODO, or
// one of their values) costs neither a context nor a place in the set: the call ends at Close,
// as its closingCtx tells.
func (s *callSet) begin(ctx context.Context) (_ context.Context, id uint64, cancel context.CancelFunc) {
	if ctx.Done() == nil && s.base != nil {
		return &closingCtx{Context: ctx, client: s.base}, 0, endNothing
	}
	ctx, cancel = context.WithCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return ctx, 0, cancel
	}
	if s.cancels == nil {
		s.cancels = make(map[uint64]context.CancelFunc)
	}
	s.next++
	s.cancels[s.next] = cancel
	return ctx, s.next, cancel
}

// end releases what begin returned.
func (s *callSet) end(id uint64, cancel context.CancelFunc) {
	if id == 0 {
		cancel()
		return
	}
	s.mu.Lock()
	delete(s.cancels, id)
	s.mu.Unlock()
	cancel()
}

// close cancels every call under way and every later one.
func (s *callSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, cancel := range s.cancels {
		cancel()
	}
	s.cancels = nil
}

// endNothing is the cancel function of a closingCtx: it has nothing to release.
func endNothing() {}

// closingCtx is the ctx of a call whose own ctx never ends: it has that ctx's values, and the end
// of the Client's context (Done, Err, and AfterFunc, so that a context derived from it for a
// backend call is cancelled at Close without a goroutine of package context to watch it).
type closingCtx struct {
	context.Context                 // the call's own: its values
	client          context.Context // the Client's: cancelled at Close, never before, no deadline
}

func (c *closingCtx) Deadline() (time.Time, bool)           { return c.client.Deadline() }
func (c *closingCtx) Done() <-chan struct{}                 { return c.client.Done() }
func (c *closingCtx) Err() error                            { return c.client.Err() }
func (c *closingCtx) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.client, f) }
