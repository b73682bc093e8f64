package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker"
)

// observed is a locker.Locker that forwards every call to the Locker it embeds, and reports what
// a Client does not show: the watchdog's renewals, and refused acquisitions.
type observed struct {
	locker.Locker
	onRenew func(key string, err error) // called for each entry of each Renew batch
	refused atomic.Int64                // Acquire calls refused because another owner held the key
}

func (o *observed) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := o.Locker.Renew(ctx, batch)
	for i, r := range batch {
		err := errors.New("backend reported no outcome")
		if len(errs) == len(batch) {
			err = errs[i]
		}
		o.onRenew(r.Key, err)
	}
	return errs
}

func (o *observed) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	a, err := o.Locker.Acquire(ctx, req)
	if err == nil && !a.Acquired() {
		o.refused.Add(1)
	}
	return a, err
}

// A timeline prints lines from many goroutines, whole and in order, with the time since start.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	err   error // the first write error
}

// printf prints text as it is.
func (t *timeline) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write(fmt.Sprintf(format, args...))
}

// event prints one event of who, stamped with the milliseconds since start.
func (t *timeline) event(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write(fmt.Sprintf("%6dms  %s  %s\n", time.Since(t.start).Milliseconds(), who, fmt.Sprintf(format, args...)))
}

// write writes s, keeping the first error. t.mu is held.
func (t *timeline) write(s string) {
	if _, err := io.WriteString(t.w, s); err != nil && t.err == nil {
		t.err = fmt.Errorf("writing the timeline: %w", err)
	}
}

// span formats a section's interval in the timeline's milliseconds.
func (t *timeline) span(s section) string {
	return fmt.Sprintf("[%dms, %dms)", s.from.Sub(t.start).Milliseconds(), s.to.Sub(t.start).Milliseconds())
}
