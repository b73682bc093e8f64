package conformance

import (
	"errors"
	"testing"

	"github.com/hashlock/locker"
)

// semaphores runs the properties of semaphores: on a locker.Semaphorer, the state machine of
// permits ("Model") and one subtest per Client property; on any other backend, Unsupported
// alone.
func (s *suite) semaphores(t *testing.T) {
	sem := false
	s.inCase(t, func(e *env) { _, sem = e.probe.faults.Locker.(locker.Semaphorer) })
	if !sem {
		t.Run("Unsupported", func(t *testing.T) { s.inCase(t, semaphoresUnsupported) })
		t.Skip("the backend is no locker.Semaphorer: no semaphores to check")
	}
	t.Run("Model", func(t *testing.T) { s.check(t, permitHolds) })
	props := []struct {
		name string
		body func(e *env)
	}{}
	for _, p := range props {
		t.Run(p.name, func(t *testing.T) { s.inCase(t, p.body) })
	}
}

// On a backend that is no Semaphorer, Acquire and TryAcquire return an error wrapping
// errors.ErrUnsupported without a call to the backend.
func semaphoresUnsupported(e *env) {
	t, ctx, key, c := e.t, background(e.t), e.key("unsupported"), e.client()
	if _, err := c.Acquire(ctx, key, 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Acquire on a backend that is no Semaphorer = %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if _, err := c.TryAcquire(ctx, key, 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryAcquire on a backend that is no Semaphorer = %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if n := e.probe.total(""); n != 0 {
		t.Fatalf("the unsupported calls made %d backend calls, want none", n)
	}
}
