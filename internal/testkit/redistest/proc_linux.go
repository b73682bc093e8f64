//go:build linux

package redistest

import (
	"os"
	"syscall"
)

// sysProcAttr puts redis-server in its own process group (so a kill reaches
// any child it forked for an AOF rewrite) and asks the kernel to SIGKILL it
// when the test process dies, even by a panic or kill -9.
//
// Caveat (Linux semantics): the death signal fires when the OS thread that
// started the process exits, not the whole process. The Go runtime does not
// retire threads except for goroutines that exit while locked to their thread
// (runtime.LockOSThread), so do not start servers from such goroutines.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killProcess sends SIGKILL to p's process group and to p itself.
func killProcess(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
