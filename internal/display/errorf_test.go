package display_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hashlock/locker/internal/display"
)

var errNotHeld = errors.New("locker: lock not held")

// Errorf wraps what fmt.Errorf wraps, and names the package once in the message.
func TestErrorf(t *testing.T) {
	inner := display.Errorf("goredis: release: %w", errNotHeld)
	for _, tc := range []struct {
		err  error
		want string
		is   []error
	}{
		{inner, "goredis: release: lock not held", []error{errNotHeld}},
		{display.Errorf("locker: unlock %q: %w", "k", inner), `locker: unlock "k": goredis: release: lock not held`, []error{errNotHeld}},
		{display.Errorf("locker: lock: %w (%w)", context.Canceled, errNotHeld), "locker: lock: context canceled (lock not held)", []error{context.Canceled, errNotHeld}},
		{display.Errorf("%w; gave up", errNotHeld), "locker: lock not held; gave up", []error{errNotHeld}},
		{display.Errorf("%v and %w", errNotHeld, errNotHeld), "locker: lock not held and lock not held", []error{errNotHeld}},
		{display.Errorf("no error %d", 3), "no error 3", nil},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("message %q, want %q", got, tc.want)
		}
		for _, e := range tc.is {
			if !errors.Is(tc.err, e) {
				t.Errorf("%q does not wrap %v", tc.err, e)
			}
		}
	}
}
