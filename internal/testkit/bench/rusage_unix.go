//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used so far, or -1.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
