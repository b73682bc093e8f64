package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashlock/locker"
)

var unlockCommand = command{
	name:    "unlock",
	summary: "remove a lock whoever holds it (--force)",
	args:    "KEY",
	help: `Deletes the lock on KEY whoever holds it, and wakes its waiters. It is for an operator
whose lock holder is stuck. The holder is not asked: it learns of it at its next renewal, when
its lease's context ends, so until then two owners may believe they hold the lock. --force is
required: a normal unlock needs the owner's token, which this command cannot know. On a
shared lock it removes every reader's hold, and on a semaphore (locker run --limit) every
permit: each holder learns of it at its next renewal.

Unless --yes is given, it shows the lock and asks for confirmation on the terminal; when stdin
is not a terminal it refuses (exit status 2) rather than read an answer from a pipe. It prints
whether a lock was removed; exit status 0 either way, 1 when the confirmation is declined or
the key holds something that is not a lock (it is left as it is: unlock deletes only locks),
69 when Redis cannot be reached.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *streams, []string) error {
		force := fs.Bool("force", false, "remove the lock whoever holds it, every reader's or permit's hold of a shared lock or semaphore (required)")
		yes := fs.Bool("yes", false, "do not ask for confirmation")
		cf := addConnFlags(fs, false)
		return func(ctx context.Context, s *streams, args []string) error {
			key, err := oneKey(args)
			switch {
			case err != nil:
				return err
			case !*force:
				return usagef("--force is required: without the owner's token the only unlock is a forced one")
			case !*yes && !s.terminal:
				return usagef("stdin is not a terminal, so there is no one to confirm: pass --yes to force-unlock %s", keyText(key))
			}
			backend, err := cf.connect(ctx)
			if err != nil {
				return err
			}
			defer backend.close()
			backend.warnDown(s, "unlock")
			client := locker.New(backend.Locker)
			defer client.Close()
			removed := false
			if *yes {
				removed, err = client.ForceUnlock(ctx, key)
			} else {
				removed, err = confirmAndUnlock(ctx, s, client, key)
			}
			if err != nil {
				return keyError(key, err)
			}
			if removed {
				_, err = fmt.Fprintf(s.out, "key %s: lock removed\n", keyText(key))
			} else {
				_, err = fmt.Fprintf(s.out, "key %s: no lock to remove (it was free)\n", keyText(key))
			}
			return err
		}
	},
}

// confirmAndUnlock shows the lock on key, asks on s whether to remove it, and on a yes removes
// the lock (whichever is on key by then). A key that is free is left alone without a question;
// a declined question is an *exitError.
func confirmAndUnlock(ctx context.Context, s *streams, client *locker.Client, key string) (bool, error) {
	st, err := client.Inspect(ctx, key)
	if err != nil || !st.Locked {
		return false, err
	}
	what := fmt.Sprintf("held by %s, %s, TTL %v", st.Owner, count(st.Holds, "hold"), st.TTL)
	switch {
	case st.Limit > 0:
		what = fmt.Sprintf("a semaphore of %d, %d taken: removes every permit, %s", st.Limit, len(st.Holders), count(st.Holds, "hold"))
	case st.Shared:
		what = fmt.Sprintf("shared by %s, %s, TTL %v", count(st.Readers, "reader"), count(st.Holds, "hold"), st.TTL)
	}
	fmt.Fprintf(s.err, "force-unlock %s (%s)? [y/N] ", keyText(key), what)
	answer, err := readLine(ctx, s.in)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return client.ForceUnlock(ctx, key)
	}
	return false, &exitError{1, fmt.Errorf("not confirmed: the lock on %s is left in place", keyText(key))}
}

// readLine reads one line from r, or gives up when ctx ends (an interrupt at the prompt: the
// read is left behind, and the process exits).
func readLine(ctx context.Context, r io.Reader) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case res := <-ch:
		return res.line, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// isTerminal reports whether f is a terminal: a character device other than the null device,
// which is a good enough test without a terminal library.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}
