package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashlock/locker"
)

// Inspect tells who holds a lock: Locker.Inspect reports the whole owner token; Client.Inspect
// (for people) only the owner's label and the first 8 characters of its random part, and
// Lease.String no more than that; an explicit owner (WithOwner) is shown whole.
func inspectOwner(e *env) {
	t, ctx, key := e.t, background(e.t), e.key("owner")
	c := e.client(locker.WithOwnerLabel("host-1/4242"))
	l := ok(c.Lock(ctx, key))(t)
	token := l.Owner()
	label, random, found := strings.Cut(token, "#")
	if !found || label != "host-1/4242" || len(random) != 32 {
		t.Fatalf("a labelled owner token is %q, want \"host-1/4242#\" and 32 random hex digits", token)
	}
	if st := inspect(e, key); st.Owner != token {
		t.Fatalf("Locker.Inspect reports owner %q, want the holder's token %q", st.Owner, token)
	}
	shown := ok(c.Inspect(ctx, key))(t).Owner
	if want := "host-1/4242#" + random[:8] + "…"; shown != want {
		t.Fatalf("Client.Inspect shows owner %q, want %q", shown, want)
	}
	if s := fmt.Sprint(l); strings.Contains(s, random[8:]) || !strings.Contains(s, random[:8]) {
		t.Fatalf("Lease.String() = %q: want the owner's first 8 random digits and no more", s)
	}
	ok(0, l.Unlock())(t)
	if st := ok(c.Inspect(ctx, key))(t); st.Owner != "" {
		t.Fatalf("Inspect of a free key shows owner %q", st.Owner)
	}

	shared := ok(c.Lock(ctx, key, locker.WithOwner("job-7")))(t)
	defer shared.Unlock()
	if st := ok(c.Inspect(ctx, key))(t); st.Owner != "job-7" {
		t.Fatalf("Client.Inspect shows the explicit owner as %q, want it whole", st.Owner)
	}
	if _, err := c.Lock(ctx, key, locker.WithOwnerLabel("bad\nlabel")); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("a label with a control character: %v, want ErrInvalid", err)
	}
}

// A key that holds something else than a lock (Factory.Foreign) is refused by every operation
// with ErrNotALock — Lock does not wait for it — and left exactly as it is; Renew reports it
// not held.
func notALock(e *env) {
	if e.foreign == nil {
		e.t.Skip("the backend stores nothing but locks (Factory.Foreign is nil)")
	}
	t, ctx, c := e.t, background(e.t), e.client()
	for i := 0; ; i++ {
		key := e.key(fmt.Sprint("foreign-", i))
		intact := e.foreign(t, key, i)
		if intact == nil {
			if i == 0 {
				t.Fatal("Factory.Foreign stored no value")
			}
			return
		}
		short, cancel := context.WithTimeout(ctx, e.ttl) // Lock must fail, not wait
		calls := []struct {
			name string
			call func() error
		}{
			{"Lock", func() error { _, err := c.Lock(short, key); return err }},
			{"TryLock", func() error { _, err := c.TryLock(ctx, key); return err }},
			{"Lock with an explicit owner", func() error { _, err := c.Lock(short, key, locker.WithOwner("o")); return err }},
			{"Inspect", func() error { _, err := c.Inspect(ctx, key); return err }},
			{"ForceUnlock", func() error { _, err := c.ForceUnlock(ctx, key); return err }},
			{"Locker.Acquire", func() error {
				_, err := e.probe.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: e.ttl, ID: "x", Fence: true})
				return err
			}},
			{"Locker.Acquire re-entry", func() error {
				_, err := e.probe.Acquire(ctx, locker.AcquireRequest{Key: key, Owner: "o", TTL: e.ttl, Reentry: true})
				return err
			}},
			{"Locker.Release", func() error {
				_, err := e.probe.Release(ctx, locker.ReleaseRequest{Key: key, Owner: "o", ID: "y"})
				return err
			}},
		}
		for _, call := range calls {
			if err := call.call(); !errors.Is(err, locker.ErrNotALock) {
				t.Errorf("foreign value %d: %s = %v, want an error wrapping ErrNotALock", i, call.name, err)
			}
		}
		cancel()
		if errs := e.probe.Renew(ctx, []locker.Renewal{{Key: key, Owner: "o", TTL: e.ttl}}); len(errs) != 1 || !errors.Is(errs[0], locker.ErrNotHeld) {
			t.Errorf("foreign value %d: Renew = %v, want ErrNotHeld", i, errs)
		}
		if !intact() {
			t.Fatalf("foreign value %d was changed by the calls above", i)
		}
	}
}
