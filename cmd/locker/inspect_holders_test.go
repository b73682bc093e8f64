//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Inspect of a semaphore shows its size, the permits taken and every holder (label and the start
// of its token, holds, own lease), and of a shared lock every reader, in text and JSON; never a
// whole token.
func TestInspectHolders(t *testing.T) {
	t.Parallel()
	onEachSemServer(t, inspectHolders)
}

// inspectHolders is TestInspectHolders on the server at url.
func inspectHolders(t *testing.T, url string) {
	lib := libClient(t, url, locker.WithTTL(10*time.Second), locker.WithOwnerLabel("batch-7/4242"))
	ctx := context.Background()
	var leases []*locker.Lease
	take := func(l *locker.Lease, err error) *locker.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		return l
	}
	defer func() {
		for _, l := range slices.Backward(leases) {
			l.Unlock()
		}
	}()
	a := take(lib.Acquire(ctx, "pool", 3))
	take(lib.Acquire(a.Context(), "pool", 3)) // re-entered: a holds 2
	b := take(lib.Acquire(ctx, "pool", 3))
	r := take(lib.RLock(ctx, "report"))
	take(lib.RLock(ctx, "report"))

	// holderLine is the line of a holder shown as owner, with n holds and "TTL D".
	holderLine := func(kind, owner string, n int) string {
		return fmt.Sprintf("  %s %s: %s, TTL D", kind, owner, count(n, "hold"))
	}
	holdersOf := func(kind string, ls ...*locker.Lease) []string {
		var lines []string
		slices.SortFunc(ls, func(x, y *locker.Lease) int { return strings.Compare(x.Owner(), y.Owner()) })
		for _, l := range ls {
			holds := 1
			if l == a {
				holds = 2
			}
			lines = append(lines, holderLine(kind, display.Owner(l.Owner()), holds))
		}
		return lines
	}
	for _, tc := range []struct {
		key   string
		first string
		lines []string
	}{
		{"pool", "key pool: semaphore of 3: 2 taken", holdersOf("permit", a, b)},
		{"report", "key report: shared by 2 readers, 2 holds, TTL D", holdersOf("reader", r, leases[4])},
	} {
		tio := newIO("", false)
		tio.exec(t, 0, "inspect", "--redis", url, tc.key)
		got := strings.Split(strings.TrimSuffix(tio.stdout.String(), "\n"), "\n")
		for i, line := range got {
			if before, ttl, ok := strings.Cut(line, "TTL "); ok {
				if d, err := time.ParseDuration(ttl); err != nil || d <= 0 || d > 10*time.Second {
					t.Errorf("%s: line %q: TTL %q, want 0 < D <= 10s", tc.key, line, ttl)
				}
				got[i] = before + "TTL D"
			}
		}
		if want := append([]string{tc.first}, tc.lines...); !slices.Equal(got, want) {
			t.Errorf("inspect %s:\n%s\nwant (D: a TTL):\n%s", tc.key, tio.stdout, strings.Join(want, "\n"))
		}
		for _, l := range leases {
			if strings.Contains(tio.stdout.String(), l.Owner()) {
				t.Errorf("inspect %s shows a whole owner token:\n%s", tc.key, tio.stdout)
			}
		}
	}

	tio := newIO("", false)
	tio.exec(t, 0, "inspect", "--json", "--redis", url, "pool")
	var got struct {
		Locked  bool `json:"locked"`
		Holds   int  `json:"holds"`
		Limit   int  `json:"limit"`
		Holders []struct {
			Owner string `json:"owner"`
			Holds int    `json:"holds"`
			TTL   string `json:"ttl"`
			TTLms int64  `json:"ttl_ms"`
		} `json:"holders"`
	}
	if err := json.Unmarshal([]byte(tio.stdout.String()), &got); err != nil {
		t.Fatalf("--json: %v in %q", err, tio.stdout)
	}
	want := holdersOf("permit", a, b)
	ok := got.Locked && got.Holds == 3 && got.Limit == 3 && len(got.Holders) == len(want)
	for i, h := range got.Holders {
		d, err := time.ParseDuration(h.TTL)
		ok = ok && i < len(want) && holderLine("permit", h.Owner, h.Holds) == want[i] &&
			err == nil && d.Milliseconds() == h.TTLms && h.TTLms > 0 && h.TTLms <= 10000
	}
	if !ok {
		t.Errorf("--json: %s; want a semaphore of 3, 3 holds, the holders %q", tio.stdout, want)
	}
}

// unlock --force on a semaphore says what it removes, and removes every permit.
func TestUnlockSemaphore(t *testing.T) {
	t.Parallel()
	onEachSemServer(t, func(t *testing.T, url string) {
		lib := libClient(t, url, locker.WithTTL(10*time.Second))
		ctx := context.Background()
		for range 2 {
			l, err := lib.Acquire(ctx, "pool", 3)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock()
		}
		tio := newIO("y\n", true)
		tio.exec(t, 0, "unlock", "--force", "--redis", url, "pool")
		if want := "force-unlock pool (a semaphore of 3, 2 taken: removes every permit, 2 holds)? [y/N] "; tio.stderr.String() != want {
			t.Errorf("the question %q, want %q", tio.stderr, want)
		}
		if want := "key pool: lock removed\n"; tio.stdout.String() != want {
			t.Errorf("stdout %q, want %q", tio.stdout, want)
		}
		if st, err := lib.Inspect(ctx, "pool"); err != nil || st.Locked || len(st.Holders) != 0 {
			t.Errorf("after unlock --force the key is %+v, %v; want free", st, err)
		}
	})
}
