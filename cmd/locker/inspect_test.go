package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			url := srv.start(t)
			lib := libClient(t, url, locker.WithTTL(10*time.Second), locker.WithOwnerLabel("billing-7/4242"))

			tio := newIO("", false)
			tio.exec(t, 0, "inspect", "--redis", url, "invoice:42")
			if got, want := tio.stdout.String(), "key invoice:42: free\n"; got != want {
				t.Errorf("free key: stdout %q, want %q", got, want)
			}

			outer, err := lib.Lock(context.Background(), "invoice:42")
			if err != nil {
				t.Fatal(err)
			}
			inner, err := lib.Lock(outer.Context(), "invoice:42")
			if err != nil {
				t.Fatal(err)
			}
			defer outer.Unlock()
			defer inner.Unlock()

			tio = newIO("", false)
			tio.exec(t, 0, "inspect", "--redis", url, "invoice:42")
			line := strings.TrimSuffix(tio.stdout.String(), "\n")
			owner := display.Owner(outer.Owner()) // "billing-7/4242#" and 8 hex digits, "…"
			if !strings.HasPrefix(owner, "billing-7/4242#") {
				t.Fatalf("owner %q: want the label first", owner)
			}
			ttl, ok := strings.CutPrefix(line, "key invoice:42: locked by "+owner+", 2 holds, TTL ")
			if d, err := time.ParseDuration(ttl); !ok || err != nil || d <= 0 || d > 10*time.Second {
				t.Errorf("held key: stdout %q, want \"key invoice:42: locked by %s, 2 holds, TTL D\" with 0 < D <= 10s", line, owner)
			}

			tio = newIO("", false)
			tio.exec(t, 0, "inspect", "--redis", url, "invoice:42", "--json") // flags may follow the key
			var got struct {
				Key    string `json:"key"`
				Locked bool   `json:"locked"`
				Owner  string `json:"owner"`
				Holds  int    `json:"holds"`
				TTL    string `json:"ttl"`
				TTLms  int64  `json:"ttl_ms"`
			}
			if err := json.Unmarshal([]byte(tio.stdout.String()), &got); err != nil {
				t.Fatalf("--json: %v in %q", err, tio.stdout)
			}
			d, err := time.ParseDuration(got.TTL)
			if got.Key != "invoice:42" || !got.Locked || got.Owner != owner || got.Holds != 2 || err != nil || d.Milliseconds() != got.TTLms || got.TTLms <= 0 || got.TTLms > 10000 {
				t.Errorf("--json: %s", tio.stdout)
			}
		})
	}
}

// describe words each kind of state, and the waiters; holderLines lists the readers of a shared
// lock and the permits of a semaphore, not the holder of an exclusive lock.
func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   locker.State
		want string
	}{
		{locker.State{}, "free"},
		{locker.State{Queued: 2}, "free, 2 queued"},
		{locker.State{Locked: true, Owner: "w#1", Holds: 1, TTL: time.Second}, "locked by w#1, 1 hold, TTL 1s"},
		{locker.State{Locked: true, Owner: "w#1", Holds: 3, TTL: time.Second, Queued: 1}, "locked by w#1, 3 holds, TTL 1s, 1 queued"},
		{locker.State{Locked: true, Shared: true, Owner: "r#1", Readers: 1, Holds: 1, TTL: time.Second}, "shared by 1 reader, 1 hold, TTL 1s"},
		{locker.State{Locked: true, Shared: true, Owner: "r#1", Readers: 3, Holds: 4, TTL: 1500 * time.Millisecond, Queued: 2}, "shared by 3 readers, 4 holds, TTL 1.5s, 2 queued"},
		{locker.State{Locked: true, Owner: "p#1", Holds: 3, TTL: time.Second, Limit: 3, Holders: []locker.Holder{{Owner: "p#1", Holds: 2, TTL: time.Second}, {Owner: "p#2", Holds: 1, TTL: time.Second}}},
			"semaphore of 3: 2 taken"},
		{locker.State{Locked: true, Owner: "p#1", Holds: 1, TTL: time.Second, Limit: 1, Holders: []locker.Holder{{Owner: "p#1", Holds: 1, TTL: time.Second}}, Queued: 4},
			"semaphore of 1: 1 taken, 4 queued"},
	} {
		if got := describe(tc.st); got != tc.want {
			t.Errorf("describe(%+v) = %q, want %q", tc.st, got, tc.want)
		}
	}
	for _, tc := range []struct {
		st   locker.State
		want string
	}{
		{locker.State{}, ""},
		{locker.State{Locked: true, Owner: "w#1", Holds: 1, TTL: time.Second, Holders: []locker.Holder{{Owner: "w#1", Holds: 1, TTL: time.Second}}}, ""},
		{locker.State{Locked: true, Shared: true, Owner: "r#1", Readers: 2, Holds: 3, TTL: time.Second, Holders: []locker.Holder{{Owner: "r#1", Holds: 2, TTL: time.Second}, {Owner: "r#2", Holds: 1, TTL: 500 * time.Millisecond}}},
			"  reader r#1: 2 holds, TTL 1s\n  reader r#2: 1 hold, TTL 500ms\n"},
		{locker.State{Locked: true, Owner: "p#1", Holds: 1, TTL: time.Second, Limit: 2, Holders: []locker.Holder{{Owner: "p#1", Holds: 1, TTL: time.Second}}},
			"  permit p#1: 1 hold, TTL 1s\n"},
	} {
		if got := holderLines(tc.st); got != tc.want {
			t.Errorf("holderLines(%+v) = %q, want %q", tc.st, got, tc.want)
		}
	}
}
