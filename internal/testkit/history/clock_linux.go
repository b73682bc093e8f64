//go:build linux

package history

import "golang.org/x/sys/unix"

// Now returns the reading of CLOCK_MONOTONIC in nanoseconds. On Linux that clock is one for the
// whole machine, so readings of different processes compare; the monotonic reading in Go's
// time.Time is private to a process.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("history: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
