package rediscore

import (
	"strconv"
	"sync/atomic"
	"time"
)

// millis formats d in whole milliseconds, rounded up, at least 1. Most programs use one or two
// TTLs, so the latest result is kept: the hot path formats nothing.
func millis(d time.Duration) string { return formatMillis(d, &lastMillis) }

// formatMillis is millis with the latest result kept in last (one for TTLs, one for waits, one
// for reply windows, so that none pushes the others out: the Client's windows are whole
// milliseconds, mostly its WithUnlockTimeout).
func formatMillis(d time.Duration, last *atomic.Pointer[formatted]) string {
	if l := last.Load(); l != nil && l.d == d {
		return l.s
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	s := strconv.FormatInt(int64(max(ms, 1)), 10)
	last.Store(&formatted{d, s})
	return s
}

// formatted is a TTL and its formatting by millis.
type formatted struct {
	d time.Duration
	s string
}

var lastMillis, lastWait, lastGrant, lastWindow atomic.Pointer[formatted]
