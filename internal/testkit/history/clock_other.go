//go:build !linux

package history

import "time"

// Now returns the wall clock in nanoseconds since the Unix epoch: readings of different
// processes compare, but a clock step during a run makes the history wrong. (On Linux it is
// CLOCK_MONOTONIC, which processes share.)
func Now() int64 { return time.Now().UnixNano() }
