package main

import (
	"fmt"
	"time"

	"github.com/hashlock/locker"
)

// A section is one critical section: from just after the outer Lock returned to just before the
// outer Unlock.
type section struct {
	worker   string
	from, to time.Time
}

// check prints the outcome of the final checks: sections of different workers never overlap, the
// key is free (st), each worker did all its rounds, the watchdog renewed. It returns an error if
// any failed.
func check(tl *timeline, sections []section, st locker.State, rounds int, renewals int64) error {
	var failed []string
	for i, a := range sections {
		for _, b := range sections[i+1:] {
			if a.worker != b.worker && a.from.Before(b.to) && b.from.Before(a.to) {
				failed = append(failed, fmt.Sprintf("critical sections overlap: %s %s and %s %s", a.worker, tl.span(a), b.worker, tl.span(b)))
			}
		}
	}
	if st.Locked {
		failed = append(failed, fmt.Sprintf("%q is still locked at the end (holds %d, ttl %v)", demoKey, st.Holds, st.TTL))
	}
	done := map[string]int{}
	for _, s := range sections {
		done[s.worker]++
	}
	for _, name := range []string{"A", "B"} {
		if done[name] != rounds {
			failed = append(failed, fmt.Sprintf("worker %s completed %d of %d rounds", name, done[name], rounds))
		}
	}
	if renewals == 0 {
		failed = append(failed, "the watchdog never renewed a lease")
	}
	for _, f := range failed {
		tl.printf("FAILED: %s\n", f)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of the demo's checks failed", len(failed))
	}
	tl.printf("key %q free at the end; rounds completed: A %d/%d, B %d/%d\n", demoKey, done["A"], rounds, done["B"], rounds)
	tl.printf("exclusion held: %d critical sections, no overlap, %d renewals\n", len(sections), renewals)
	return tl.err
}
