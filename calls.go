package locker

import (
	"context"
	"sync"
)

// callSet is the set of a Client's calls under way (Lock, TryLock, Inspect, ForceUnlock): Close
// cancels their contexts, so that a call waiting for the backend ends at once.
type callSet struct {
	mu      sync.Mutex
	closed  bool
	next    uint64
	cancels map[uint64]context.CancelFunc
}

// begin returns a ctx for one call's backend calls: ctx, ending also at close. Pass id and
// cancel to end when the call is done.
func (s *callSet) begin(ctx context.Context) (_ context.Context, id uint64, cancel context.CancelFunc) {
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
