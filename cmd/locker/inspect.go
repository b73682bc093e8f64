package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/hashlock/locker"
)

var inspectCommand = command{
	name:    "inspect",
	summary: "show whether a key is locked, its hold count and remaining lease",
	args:    "KEY",
	help: `Prints "key KEY: locked, N holds, TTL D" or "key KEY: free"; with --json, one JSON
object on one line: {"key": …, "locked": …, "holds": …, "ttl": "1.234s", "ttl_ms": 1234}.
The owner is not shown: it is a random token. Exit status 0 whether the key is locked or not.`,
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
			client := locker.New(backend.Locker)
			defer client.Close()
			st, err := client.Inspect(ctx, key)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(s.out, key, st)
			}
			_, err = fmt.Fprintf(s.out, "key %s: %s\n", key, describe(st))
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
	case args[0] == "":
		return "", usagef("the key is empty")
	}
	return args[0], nil
}

// describe is a State for people: "locked, 2 holds, TTL 1.234s" or "free".
func describe(st locker.State) string {
	if !st.Locked {
		return "free"
	}
	return fmt.Sprintf("locked, %s, TTL %v", holds(st.Holds), st.TTL)
}

// holds is "1 hold", "2 holds"…
func holds(n int) string {
	if n == 1 {
		return "1 hold"
	}
	return fmt.Sprintf("%d holds", n)
}

func printJSON(w io.Writer, key string, st locker.State) error {
	return json.NewEncoder(w).Encode(struct {
		Key    string `json:"key"`
		Locked bool   `json:"locked"`
		Holds  int    `json:"holds"`
		TTL    string `json:"ttl"`
		TTLms  int64  `json:"ttl_ms"`
	}{key, st.Locked, st.Holds, st.TTL.String(), st.TTL.Milliseconds()})
}
