//go:build !unix

package bench

import "time"

// cpuTime returns -1: the process's CPU time is not measured on this system.
func cpuTime() time.Duration { return -1 }
