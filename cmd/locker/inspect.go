package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var inspectCommand = command{
	name:    "inspect",
	summary: "show whether a key is locked (exclusive, shared or a semaphore), by whom, its holds, lease and waiters",
	args:    "KEY",
	help: `Prints "key KEY: locked by OWNER, N holds, TTL D" (an exclusive lock; N counts the
shared holds its owner took inside it too), "key KEY: shared by R readers, N holds, TTL D" (a
shared lock: locker run -s, Client.RLock; N is the holds of all R readers), "key KEY:
semaphore of N: K taken" (locker run --limit N, Client.Acquire: K of its N permits are held) or
"key KEY: free", followed by ", Q queued" when Q owners wait in the key's queue (locker run
--fair, and exclusive runs waiting for readers to leave). A shared lock is followed by one line
per reader, "  reader OWNER: N holds, TTL D", and a semaphore by one per permit, "  permit
OWNER: N holds, TTL D" (N counts a nested run's re-entry; TTL is that holder's own lease). With
--json, one JSON object on one line: {"key": …, "locked": …, "owner": …, "holds": …, "ttl":
"1.234s", "ttl_ms": 1234, "shared": false, "readers": 0, "queued": 0, "limit": 0, "holders":
[{"owner": …, "holds": …, "ttl": …, "ttl_ms": …}]}; for a shared lock or a semaphore "owner"
is one of the holders and "holds" all their holds, "limit" is the semaphore's N (0 for a lock),
and "holders" lists every holder ([] when free). OWNER is the holder's label and the start of
its random token ("build-7/4242#9f86d081…": locker run labels its owners with host/pid); the
whole token is never shown, since it would let anyone release the lock. Exit status 0 whether
the key is locked or not; 1 when the key holds something that is not a lock (it is left as it
is); 69 when Redis cannot be reached.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *streams, []string) error {
		asJSON := fs.Bool("json", false, "print a JSON object")
		cf := addConnFlags(fs, false)
		return func(ctx context.Context, s *streams, args []string) error {
			key, err := oneKey(args)
			if err != nil {
				return err
			}
			backend, err := cf.connect(ctx)
			if err != nil {
				return err
			}
			defer backend.close()
			backend.warnDown(s, "inspect")
			client := locker.New(backend.Locker)
			defer client.Close()
			st, err := client.Inspect(ctx, key)
			if err != nil {
				return keyError(key, err)
			}
			if *asJSON {
				return printJSON(s.out, key, st)
			}
			_, err = fmt.Fprintf(s.out, "key %s: %s\n%s", keyText(key), describe(st), holderLines(st))
			return err
		}
	},
}

// oneKey returns the one positional argument, a key.
func oneKey(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usagef("no key given")
	case len(args) > 1:
		return "", usagef("one key at a time, got %d arguments", len(args))
	}
	return args[0], checkKey(args[0])
}

// checkKey refuses, with a usage error, a key that the library would refuse: an empty one, or
// one over locker.MaxKeyLen.
func checkKey(key string) error {
	switch {
	case key == "":
		return usagef("the key is empty")
	case len(key) > locker.MaxKeyLen:
		return usagef("the key is %d bytes, over the limit of %d", len(key), locker.MaxKeyLen)
	}
	return nil
}

// keyText is key for a line of output: as it is when it is short and plain (printable, no
// spaces), else quoted and cut (display.Key), so that a key cannot forge or flood the output.
func keyText(key string) string {
	if len(key) > display.MaxKey || strings.IndexFunc(key, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 || strings.HasPrefix(key, `"`) {
		return display.Key(key)
	}
	return key
}

// keyError turns an error wrapping locker.ErrNotALock into one clear line, and one wrapping
// locker.ErrInvalid (a key over the library's limit) into a usage error; other errors are
// returned as they are.
func keyError(key string, err error) error {
	if errors.Is(err, locker.ErrInvalid) {
		return usagef("%s", errorText(err))
	}
	if errors.Is(err, locker.ErrNotALock) {
		return fmt.Errorf("key %s is not a lock (it holds another type of value, or a hash that locker did not write), so locker leaves it alone", keyText(key))
	}
	return err
}

// describe is a State for people: "locked by web-1/42#9f86d081…, 2 holds, TTL 1.234s",
// "shared by 3 readers, 4 holds, TTL 1.234s", "semaphore of 3: 2 taken" or "free", then ", 2
// queued" when owners wait in the key's queue.
func describe(st locker.State) string {
	var out string
	switch {
	case !st.Locked:
		out = "free"
	case st.Limit > 0:
		out = fmt.Sprintf("semaphore of %d: %d taken", st.Limit, len(st.Holders))
	case st.Shared:
		out = fmt.Sprintf("shared by %s, %s, TTL %v", count(st.Readers, "reader"), count(st.Holds, "hold"), st.TTL)
	default:
		out = fmt.Sprintf("locked by %s, %s, TTL %v", st.Owner, count(st.Holds, "hold"), st.TTL)
	}
	if st.Queued > 0 {
		out += fmt.Sprintf(", %d queued", st.Queued)
	}
	return out
}

// holderLines lists, for a shared lock and a semaphore, one line per holder ("  reader OWNER: 2
// holds, TTL 1.234s", "  permit OWNER: 1 hold, TTL 1.234s"), each holder's owner as Client.Inspect
// shortens it; "" for an exclusive lock, whose one holder describe names, and for a free key.
func holderLines(st locker.State) string {
	kind := "reader"
	switch {
	case st.Limit > 0:
		kind = "permit"
	case !st.Shared:
		return ""
	}
	var b strings.Builder
	for _, h := range st.Holders {
		fmt.Fprintf(&b, "  %s %s: %s, TTL %v\n", kind, h.Owner, count(h.Holds, "hold"), h.TTL)
	}
	return b.String()
}

// count is "1 hold", "2 holds"… for n of noun.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// jsonHolder is one holder in printJSON's "holders".
type jsonHolder struct {
	Owner string `json:"owner"`
	Holds int    `json:"holds"`
	TTL   string `json:"ttl"`
	TTLms int64  `json:"ttl_ms"`
}

// printJSON prints key's state as one JSON object on one line (the key whole).
func printJSON(w io.Writer, key string, st locker.State) error {
	holders := make([]jsonHolder, 0, len(st.Holders))
	for _, h := range st.Holders {
		holders = append(holders, jsonHolder{h.Owner, h.Holds, h.TTL.String(), h.TTL.Milliseconds()})
	}
	return json.NewEncoder(w).Encode(struct {
		Key     string       `json:"key"`
		Locked  bool         `json:"locked"`
		Owner   string       `json:"owner,omitempty"`
		Holds   int          `json:"holds"`
		TTL     string       `json:"ttl"`
		TTLms   int64        `json:"ttl_ms"`
		Shared  bool         `json:"shared"`
		Readers int          `json:"readers"`
		Queued  int          `json:"queued"`
		Limit   int          `json:"limit"`
		Holders []jsonHolder `json:"holders"`
	}{key, st.Locked, st.Owner, st.Holds, st.TTL.String(), st.TTL.Milliseconds(), st.Shared, st.Readers, st.Queued, st.Limit, holders})
}
