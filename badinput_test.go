package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/internal/testkit/callcount"
)

// lockReenterUnlock locks key, re-enters it through the lease's context, and unlocks both.
func lockReenterUnlock(ctx context.Context, c *locker.Client, key string, opts ...locker.Option) error {
	outer, err := c.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	inner, err := c.Lock(outer.Context(), key, opts...)
	if err != nil {
		return errors.Join(err, outer.Unlock())
	}
	if inner.Holds() != 2 {
		return errors.Join(errors.New("re-entry did not report 2 holds"), inner.Unlock(), outer.Unlock())
	}
	return errors.Join(inner.Unlock(), outer.Unlock())
}

// Every bad or unusual input of the public API gives the documented outcome, panics nowhere and
// leaves nothing behind; an invalid one never reaches the backend.
func TestBadInput(t *testing.T) {
	const year = 365 * 24 * time.Hour
	var nilCtx context.Context
	// bg is the ctx of every call: set per row, inside its bubble, with a deadline, so that a
	// call that waits for ever (a re-entry waiting for itself) fails the row instead of hanging.
	var bg context.Context
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	type row struct {
		name    string
		keys    []string // the keys the row touches, free afterwards
		want    error    // nil: the call works
		invalid bool     // the backend must not be called at all
		run     func(t *testing.T, c *locker.Client, b *callcount.Counter) error
	}
	lockKey := func(key string, opts ...locker.Option) func(*testing.T, *locker.Client, *callcount.Counter) error {
		return func(_ *testing.T, c *locker.Client, _ *callcount.Counter) error {
			return lockReenterUnlock(bg, c, key, opts...)
		}
	}
	maxKey := strings.Repeat("k", locker.MaxKeyLen)
	longKey := maxKey + "k"
	hugeKey := strings.Repeat("\x00", 1<<20)
	rows := []row{
		{name: "empty key", keys: []string{""}, want: locker.ErrInvalid, invalid: true, run: lockKey("")},
		{name: "MaxKeyLen key", keys: []string{maxKey}, run: lockKey(maxKey)},
		{name: "MaxKeyLen+1 key", keys: []string{longKey}, want: locker.ErrInvalid, invalid: true, run: lockKey(longKey)},
		{name: "1MiB key", keys: []string{hugeKey}, want: locker.ErrInvalid, invalid: true, run: lockKey(hugeKey)},
		{name: "key with NUL", keys: []string{"a\x00b"}, run: lockKey("a\x00b")},
		{name: "NUL key", keys: []string{"\x00"}, run: lockKey("\x00")},
		{name: "invalid UTF-8 key", keys: []string{"\xff\xfe\xc3("}, run: lockKey("\xff\xfe\xc3(")},
		{name: "open brace", keys: []string{"{"}, run: lockKey("{")},
		{name: "close brace", keys: []string{"}"}, run: lockKey("}")},
		{name: "empty tag", keys: []string{"{}"}, run: lockKey("{}")},
		{name: "tag", keys: []string{"{tag}"}, run: lockKey("{tag}")},
		{name: "tagged key", keys: []string{"a{tag}b"}, run: lockKey("a{tag}b")},
		{name: "TTL 0", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true, run: lockKey("k", locker.WithTTL(0))},
		{name: "negative TTL", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true, run: lockKey("k", locker.WithTTL(-time.Second))},
		{name: "TTL 999µs", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true, run: lockKey("k", locker.WithTTL(999*time.Microsecond))},
		{name: "unlock timeout 0", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true, run: lockKey("k", locker.WithUnlockTimeout(0))},
		{name: "TTL 1ms", keys: []string{"k"}, run: lockKey("k", locker.WithTTL(time.Millisecond))},
		{name: "TTL 100 years", keys: []string{"k"}, run: func(t *testing.T, c *locker.Client, _ *callcount.Counter) error {
			l, err := c.Lock(bg, "k", locker.WithTTL(100*year))
			if err != nil {
				return err
			}
			st, err := c.Inspect(bg, "k")
			if err != nil || !st.Locked || st.TTL <= 99*year {
				t.Errorf("Inspect = %+v, %v; want locked with a TTL over 99 years", st, err)
			}
			return l.Unlock()
		}},
		{name: "nil ctx", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true, run: func(_ *testing.T, c *locker.Client, _ *callcount.Counter) error {
			_, err := c.Lock(nilCtx, "k")
			return err
		}},
		{name: "cancelled ctx", keys: []string{"k"}, want: context.Canceled, invalid: true, run: func(_ *testing.T, c *locker.Client, _ *callcount.Counter) error {
			_, err := c.Lock(cancelled, "k")
			return err
		}},
		{name: "Unlock twice", keys: []string{"k"}, want: locker.ErrNotHeld, run: func(t *testing.T, c *locker.Client, b *callcount.Counter) error {
			l, err := c.Lock(bg, "k")
			if err != nil {
				return err
			}
			if err := l.Unlock(); err != nil {
				return err
			}
			before := b.Calls().RoundTrips()
			err = l.Unlock()
			if n := b.Calls().RoundTrips() - before; n != 0 {
				t.Errorf("the second Unlock made %d backend calls, want 0", n)
			}
			return err
		}},
		{name: "Unlock after ForceUnlock", keys: []string{"k"}, want: locker.ErrNotHeld, run: func(t *testing.T, c *locker.Client, _ *callcount.Counter) error {
			l, err := c.Lock(bg, "k")
			if err != nil {
				return err
			}
			if removed, err := c.ForceUnlock(bg, "k"); err != nil || !removed {
				t.Errorf("ForceUnlock = %v, %v; want true, nil", removed, err)
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, locker.ErrLockLost) {
				t.Errorf("lease cause after ForceUnlock = %v, want ErrLockLost", cause)
			}
			return l.Unlock()
		}},
		{name: "Lock after Close", keys: []string{"k"}, want: locker.ErrClosed, invalid: true, run: func(_ *testing.T, c *locker.Client, _ *callcount.Counter) error {
			c.Close()
			_, err := c.Lock(bg, "k")
			return err
		}},
		{name: "empty owner", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true, run: lockKey("k", locker.WithOwner(""))},
		{name: "MaxOwnerLen+1 owner", keys: []string{"k"}, want: locker.ErrInvalid, invalid: true,
			run: lockKey("k", locker.WithOwner(strings.Repeat("o", locker.MaxOwnerLen+1)))},
		{name: "MaxOwnerLen owner", keys: []string{"k"}, run: lockKey("k", locker.WithOwner(strings.Repeat("o", locker.MaxOwnerLen)))},
		{name: "binary owner", keys: []string{"k"}, run: lockKey("k", locker.WithOwner("\x00\xff"))},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stop := context.WithTimeout(context.Background(), time.Minute)
				defer stop()
				bg = ctx
				mem := memory.New()
				b := callcount.Count(mem)
				c := locker.New(b)
				defer c.Close()
				err := r.run(t, c, b)
				switch {
				case r.want == nil && err != nil:
					t.Fatalf("got %v, want success", err)
				case r.want != nil && !errors.Is(err, r.want):
					t.Fatalf("got %v, want an error wrapping %v", err, r.want)
				}
				if n := b.Calls().RoundTrips(); r.invalid && n != 0 {
					t.Errorf("%d backend calls for an invalid call, want 0", n)
				}
				for _, key := range r.keys {
					if st, err := mem.Inspect(bg, key); err != nil || st.Locked || st.Queued != 0 || st.Holders != nil {
						t.Errorf("key %.20q left as %+v, %v; want free", key, st, err)
					}
				}
			})
		})
	}
}
