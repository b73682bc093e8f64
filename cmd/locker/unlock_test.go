package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

func TestUnlock(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			url := srv.start(t)
			lib := libClient(t, url, locker.WithTTL(3*time.Second), locker.WithOwnerLabel("tests/1")) // renewed well in time on a loaded machine
			ctx := context.Background()
			lock := func(key string) *locker.Lease {
				t.Helper()
				l, err := lib.Lock(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			locked := func(key string) bool {
				t.Helper()
				st, err := lib.Inspect(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return st.Locked
			}

			// --yes: no question. The holder's lease ends at its next renewal.
			held := lock("a")
			tio := newIO("", false)
			tio.exec(t, 0, "unlock", "--redis", url, "--force", "a", "--yes")
			if got, want := tio.stdout.String(), "key a: lock removed\n"; got != want {
				t.Errorf("--yes: stdout %q, want %q", got, want)
			}
			if locked("a") {
				t.Error("--yes: still locked")
			}
			select {
			case <-held.Context().Done():
				if cause := context.Cause(held.Context()); !errors.Is(cause, locker.ErrLockLost) {
					t.Errorf("the holder's lease ended with %v, want ErrLockLost", cause)
				}
			case <-time.After(10 * time.Second):
				t.Error("the holder's lease did not end within 10s of the forced unlock")
			}

			// A free key.
			tio = newIO("", false)
			tio.exec(t, 0, "unlock", "--redis", url, "--force", "--yes", "a")
			if got, want := tio.stdout.String(), "key a: no lock to remove (it was free)\n"; got != want {
				t.Errorf("free key: stdout %q, want %q", got, want)
			}

			// No --yes and stdin not a terminal: refused, nothing read, the lock stays.
			b := lock("b")
			defer b.Unlock()
			tio = newIO("y\n", false)
			tio.exec(t, 2, "unlock", "--redis", url, "--force", "b")
			if want := "stdin is not a terminal"; !strings.Contains(tio.stderr.String(), want) || !strings.Contains(tio.stderr.String(), "--yes") {
				t.Errorf("not a terminal: stderr lacks %q and --yes:\n%s", want, tio.stderr)
			}
			if !locked("b") {
				t.Error("not a terminal: the lock was removed")
			}

			// A terminal, and the answer is no (or nothing).
			for _, answer := range []string{"n\n", "\n", "maybe\n"} {
				tio = newIO(answer, true)
				tio.exec(t, 1, "unlock", "--redis", url, "--force", "b")
				if want := "force-unlock b (held by tests/1#"; !strings.Contains(tio.stderr.String(), want) || !strings.Contains(tio.stderr.String(), "…, 1 hold, TTL ") {
					t.Errorf("answer %q: the question lacks %q and the hold count:\n%s", answer, want, tio.stderr)
				}
				if want := "force-unlock b (held by tests/1#"; !strings.Contains(tio.stderr.String(), want) {
					t.Errorf("answer %q: the question lacks %q:\n%s", answer, want, tio.stderr)
				}
				if want := "not confirmed"; !strings.Contains(tio.stderr.String(), want) {
					t.Errorf("answer %q: stderr lacks %q:\n%s", answer, want, tio.stderr)
				}
				if !locked("b") {
					t.Fatalf("answer %q: the lock was removed", answer)
				}
			}

			// A terminal, and the answer is yes.
			tio = newIO("Yes\n", true)
			tio.exec(t, 0, "unlock", "--redis", url, "--force", "b")
			if got, want := tio.stdout.String(), "key b: lock removed\n"; got != want {
				t.Errorf("answer yes: stdout %q, want %q", got, want)
			}
			if locked("b") {
				t.Error("answer yes: still locked")
			}

			// A terminal, and a free key: no question.
			tio = newIO("", true)
			tio.exec(t, 0, "unlock", "--redis", url, "--force", "c")
			if tio.stderr.String() != "" {
				t.Errorf("free key: stderr %q, want no question", tio.stderr)
			}

			// No --force: a usage error, the lock stays.
			c := lock("c")
			defer c.Unlock()
			tio = newIO("", false)
			tio.exec(t, 2, "unlock", "--redis", url, "--yes", "c")
			if !locked("c") {
				t.Error("without --force: the lock was removed")
			}
		})
	}
}
