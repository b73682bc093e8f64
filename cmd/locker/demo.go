package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var demoCommand = command{
	name:    "demo",
	summary: "two workers contend for one lock, then check that mutual exclusion held",
	help: `Workers A and B, each with its own Client, contend for the key "demo:invoice". In each
round both try at once; the winner works for --work, re-enters the lock through its lease's
context (holds 2), works again and unlocks twice, while the watchdog renews the lease; the
loser waits and takes over on the release. A timeline is printed, then a check that the
critical sections never overlapped.

The demo runs on an embedded miniredis unless --redis names a server ($LOCKER_REDIS is not
used), through the driver of --driver.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *streams, []string) error {
		cfg := demoConfig{TTL: 200 * time.Millisecond, Work: 120 * time.Millisecond, Rounds: 2}
		fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "lease length; the watchdog renews a lease every ttl/3")
		fs.DurationVar(&cfg.Work, "work", cfg.Work, "how long a worker works at each lock depth")
		fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "how many times each worker takes the lock")
		cf := addConnFlags(fs, true)
		return func(ctx context.Context, s *streams, _ []string) error {
			if err := cfg.validate(); err != nil {
				return err
			}
			backend, err := cf.connect(ctx)
			if err != nil {
				return err
			}
			defer backend.close()
			backend.warnDown(s, "demo")
			return runDemo(ctx, s.out, cfg, backend)
		}
	},
}

const demoKey = "demo:invoice"

type demoConfig struct {
	TTL    time.Duration // lease length
	Work   time.Duration // work at each of the two lock depths
	Rounds int           // rounds per worker
}

func (c demoConfig) validate() error {
	switch {
	case c.TTL < locker.MinTTL:
		return usagef("--ttl %v: must be at least %v", c.TTL, locker.MinTTL)
	case c.Work <= c.TTL/3:
		return usagef("--work %v: must be more than a third of --ttl %v, or the watchdog never renews", c.Work, c.TTL)
	case c.Rounds < 1:
		return usagef("--rounds %d: must be at least 1", c.Rounds)
	}
	return nil
}

// runDemo runs the demo on backend and writes its timeline and the final check to w. It returns
// an error for an invalid cfg (a *usageError), a library error, or a failed check.
func runDemo(ctx context.Context, w io.Writer, cfg demoConfig, backend *conn) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	tl := &timeline{w: w, start: time.Now()}
	tl.printf("backend: %s\n", backend.desc)
	tl.printf("workers A and B contend for %q: ttl %v, work %v per depth, %d rounds\n", demoKey, cfg.TTL, cfg.Work, cfg.Rounds)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var renewals atomic.Int64
	workers := []*worker{{name: "A"}, {name: "B"}}
	for _, wk := range workers {
		// One Client per worker, as separate processes would have, over the one backend.
		wk.obs = &observed{Locker: backend.Locker, onRenew: func(key string, err error) {
			if err != nil {
				tl.event(wk.name, "renewal of %q failed: %v", key, err)
				return
			}
			tl.event(wk.name, "renewed %q", key)
			renewals.Add(1)
		}}
		wk.client = locker.New(wk.obs, locker.WithTTL(cfg.TTL), locker.WithFencing())
		defer wk.client.Close() // Close waits for the watchdog: no event comes after it
	}

	var (
		mu       sync.Mutex
		sections []section
		firstErr error
	)
	for range cfg.Rounds {
		var wg sync.WaitGroup
		for _, wk := range workers {
			wg.Go(func() {
				sec, err := wk.round(ctx, tl, cfg)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel() // stop the other worker too
				}
				if !sec.from.IsZero() {
					sections = append(sections, sec)
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
	}
	st, err := workers[0].client.Inspect(ctx, demoKey)
	if err != nil {
		return display.Errorf("inspect at the end: %w", err)
	}
	for _, wk := range workers {
		wk.client.Close()
	}
	return check(tl, sections, st, cfg.Rounds, renewals.Load())
}

type worker struct {
	name   string
	obs    *observed
	client *locker.Client
}

// round takes the lock, works, re-enters, works, and unlocks twice. The section is zero when the
// lock was not obtained.
func (wk *worker) round(ctx context.Context, tl *timeline, cfg demoConfig) (section, error) {
	tl.event(wk.name, "tried")
	refused, asked := wk.obs.refused.Load(), time.Now()
	outer, err := wk.client.Lock(ctx, demoKey)
	if err != nil {
		return section{}, display.Errorf("worker %s: %w", wk.name, err)
	}
	sec := section{worker: wk.name, from: time.Now()}
	if wk.obs.refused.Load() > refused {
		tl.event(wk.name, "waited %dms", sec.from.Sub(asked).Milliseconds())
	}
	tl.event(wk.name, "acquired (holds %d, fencing token %d)", outer.Holds(), outer.Token())
	err = wk.nested(outer, tl, cfg)
	sec.to = time.Now()
	if uerr := outer.Unlock(); uerr != nil {
		return sec, errors.Join(err, display.Errorf("worker %s: outer unlock: %w", wk.name, uerr))
	}
	tl.event(wk.name, "released outer")
	return sec, err
}

// nested is the work under the outer lease: work, re-enter, work, release the inner lease.
func (wk *worker) nested(outer *locker.Lease, tl *timeline, cfg demoConfig) error {
	if err := work(outer.Context(), cfg.Work); err != nil {
		return display.Errorf("worker %s: work at depth 1: %w", wk.name, err)
	}
	inner, err := wk.client.Lock(outer.Context(), demoKey)
	if err != nil {
		return display.Errorf("worker %s: re-enter: %w", wk.name, err)
	}
	tl.event(wk.name, "re-entered (holds %d)", inner.Holds())
	if want := outer.Holds() + 1; inner.Holds() != want {
		err = fmt.Errorf("worker %s: re-entry gave holds %d, want %d: the lease had run out on the backend", wk.name, inner.Holds(), want)
	} else if err = work(inner.Context(), cfg.Work); err != nil {
		err = display.Errorf("worker %s: work at depth 2: %w", wk.name, err)
	}
	if uerr := inner.Unlock(); uerr != nil {
		return errors.Join(err, display.Errorf("worker %s: inner unlock: %w", wk.name, uerr))
	}
	tl.event(wk.name, "released inner")
	return err
}

// work waits for d, or fails with the cause when ctx (a lease's context) ends first.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
