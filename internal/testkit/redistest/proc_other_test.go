//go:build !linux

package redistest

import "testing"

// checkGone is only implemented on Linux; elsewhere it just logs.
func checkGone(t *testing.T, pid int) {
	t.Helper()
	t.Logf("not checking that process %d is gone on this platform", pid)
}
