package backend_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A server that was killed (its port refuses connections) is reported as down, never as
// contention, on every driver, after the Client had locked on it once: Lock gives up after
// WithUnavailableTimeout with an error that wraps ErrUnavailable and the driver's own error
// (ECONNREFUSED), and a Lock whose ctx ends first wraps ctx's error as well. When the server
// comes back on its port, Lock gets the lock again.
func TestKilledServer(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			c := locker.New(d.new(t, srv.Addr), locker.WithUnavailableTimeout(time.Second))
			defer c.Close()
			ctx := context.Background()
			l, err := c.Lock(ctx, "killed")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
			srv.Stop()

			wantDown := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, locker.ErrUnavailable) || errors.Is(err, locker.ErrNotObtained) || !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("%s on a killed server = %v, want ErrUnavailable with the driver's ECONNREFUSED, not ErrNotObtained", what, err)
				}
			}
			start := time.Now()
			_, err = c.Lock(ctx, "killed")
			took := time.Since(start)
			t.Logf("Lock on the killed server, after %v: %v", took.Round(time.Millisecond), err)
			wantDown("Lock", err)
			// One second of tries, and the last one's own time: a dial is refused at once, but a
			// driver may retry it within a call (go-redis's took 2.4s: five dials 100ms apart,
			// three times over), and a loaded machine schedules late.
			if took < time.Second || took > 7*time.Second {
				t.Fatalf("Lock on a killed server returned after %v, want about WithUnavailableTimeout (1s)", took)
			}

			within, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			_, err = c.Lock(within, "killed", locker.WithUnavailableTimeout(time.Minute))
			t.Logf("Lock with a 500ms ctx: %v", err)
			wantDown("Lock with a 500ms ctx", err)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock with a 500ms ctx on a killed server = %v, want it to wrap DeadlineExceeded", err)
			}

			srv.Restart(t)
			back, err := c.Lock(ctx, "killed", locker.WithUnavailableTimeout(30*time.Second))
			if err != nil {
				t.Fatalf("Lock once the server is back = %v", err)
			}
			if err := back.Unlock(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
