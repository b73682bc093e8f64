package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/hashlock/locker"
)

// A backend that cannot be reached is reported as down, never as contention: Lock gives up after
// WithUnavailableTimeout with an error that wraps ErrUnavailable and the backend's own error,
// and not ErrNotObtained; when its ctx ends first, the error wraps ctx's error too. With no bound
// (WithUnavailableTimeout(0)), Lock gets the key once the backend answers again, within 200ms.
func unavailable(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("unavailable")
	slack := time.Duration(0)
	if !e.sync {
		slack = e.ttl / 4
	}
	wantDown := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, errUnreachable) || errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("%s on an unreachable backend = %v, want ErrUnavailable with the backend's error, not ErrNotObtained", what, err)
		}
	}
	e.probe.faults.setDown(true)
	bound := e.ttl / 2
	c := e.client(locker.WithUnavailableTimeout(bound))
	start := time.Now()
	_, err := c.Lock(ctx, key)
	wantDown("Lock", err)
	if took := time.Since(start); took < bound || took > bound+slack {
		t.Fatalf("Lock on an unreachable backend returned after %v, want WithUnavailableTimeout (%v)", took, bound)
	}

	within, cancel := context.WithTimeout(ctx, bound/2)
	defer cancel()
	_, err = c.Lock(within, key)
	wantDown("Lock with a ctx shorter than the bound", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a ctx shorter than the bound = %v, want it to wrap DeadlineExceeded", err)
	}

	patient := e.client(locker.WithUnavailableTimeout(0))
	got := make(chan leaseOrError, 1)
	go func() {
		l, err := patient.Lock(ctx, key)
		got <- leaseOrError{l, err}
	}()
	time.Sleep(bound + bound/2) // past any bound it could have had
	select {
	case r := <-got:
		t.Fatalf("Lock with no bound returned while the backend was down: %v", r.err)
	default:
	}
	e.probe.faults.setDown(false)
	back := time.Now()
	l := (<-got).get(t, "Lock once the backend answers again")
	if took := time.Since(back); took > 200*time.Millisecond+slack {
		t.Fatalf("Lock got the key %v after the backend answered again, want 200ms at most", took)
	}
	ok(0, l.Unlock())(t)
}
