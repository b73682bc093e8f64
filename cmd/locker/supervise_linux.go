package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// supervisorPath is the binary to start as the supervisor: this one, through /proc/self/exe,
// which works even if the file was replaced or removed since; without /proc, its path.
func supervisorPath() (string, error) {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		return os.Executable()
	}
	return self, nil
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// setSubreaper makes the process a child subreaper: the orphaned descendants re-parent to it.
func setSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", errno)
	}
	return nil
}

// commandAttr has the command killed (SIGKILL) if the supervisor dies.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// descendants returns the process IDs of the live (not zombie) descendants of this process.
func descendants() []int { return descendantsOf(os.Getpid()) }

// descendantsOf returns the process IDs of the live (not zombie) descendants of the process
// root, from the parent links in /proc/*/stat.
func descendantsOf(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, zombie, ok := procParent(pid)
		if ok && !zombie {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		next := children[queue[0]]
		queue = append(queue[1:], next...)
		out = append(out, next...)
	}
	return out
}

// procParent reads the parent of pid and whether it is a zombie from /proc/PID/stat.
func procParent(pid int) (ppid int, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so cut at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, string(f[0]) == "Z", err == nil
}
