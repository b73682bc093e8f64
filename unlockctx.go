package locker

import (
	"context"
	"sync"
	"time"
)

// unlockCtx is the context of an Unlock's backend calls: the values of the lease's context
// (tracing), without its end, ending at the deadline that WithUnlockTimeout sets, or when Unlock
// is done (context.Canceled). It is context.WithTimeout(&l.values, timeout) in the Lease's own
// allocation: its Done channel and timer are made only when a call asks for Done (a driver that
// watches ctx, or rediscore.Interruptible), three allocations instead of five.
type unlockCtx struct {
	values   *leaseValues
	deadline time.Time

	mu     sync.Mutex
	done   chan struct{} // made by the first call of Done
	closed bool          // done is closed
	timer  *time.Timer   // closes done at the deadline; made with done
	err    error         // nil until it ends: context.DeadlineExceeded or context.Canceled
}

// start sets the deadline timeout from now.
func (u *unlockCtx) start(values *leaseValues, timeout time.Duration) {
	u.values, u.deadline = values, time.Now().Add(timeout)
}

func (u *unlockCtx) Deadline() (time.Time, bool) { return u.deadline, true }

func (u *unlockCtx) Done() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done == nil {
		u.done = make(chan struct{})
		if u.err == nil && !time.Now().Before(u.deadline) {
			u.err = context.DeadlineExceeded
		}
		if u.err != nil {
			u.closed = true
			close(u.done)
		} else {
			u.timer = time.AfterFunc(time.Until(u.deadline), u.expire)
		}
	}
	return u.done
}

// Err returns nil until the context ends; it ends at the deadline whether or not Done was asked
// for, and Done is closed (once made) before Err returns an error.
func (u *unlockCtx) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil && !time.Now().Before(u.deadline) {
		u.end(context.DeadlineExceeded)
	}
	return u.err
}

func (u *unlockCtx) Value(key any) any { return u.values.Value(key) }

func (u *unlockCtx) String() string { return "locker.Lease.Unlock" }

// expire ends the context at its deadline (the timer's).
func (u *unlockCtx) expire() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.end(context.DeadlineExceeded)
}

// stop ends the context with context.Canceled, if it has not ended, when Unlock is done (as
// WithTimeout's cancel does), so that a driver's call still under way gives up.
func (u *unlockCtx) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.end(context.Canceled)
}

// end ends the context with err, unless it has ended. u.mu is held.
func (u *unlockCtx) end(err error) {
	if u.err == nil {
		u.err = err
	}
	if u.done != nil && !u.closed {
		u.closed = true
		close(u.done)
	}
	if u.timer != nil {
		u.timer.Stop()
	}
}
