package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal and returns its master and slave sides, closed at the end
// of the test. It skips the test where /dev/ptmx is unavailable.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("no pseudo-terminal: unlock: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Skipf("no pseudo-terminal: TIOCGPTN: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// A ttyRun is locker, a helper process (see helper), run at a terminal of its own: it leads a
// new session whose controlling terminal is a new pseudo-terminal, its stdin, stdout and stderr.
// It is then in the terminal's foreground process group, with the supervisor and the command,
// as a command typed at a shell's prompt is.
type ttyRun struct {
	master *os.File      // the terminal's master side: what is written to it is typed
	out    *output       // what the terminal shows
	read   chan struct{} // closed when the master side is read to the end
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// startTTYRun starts "locker args" at a new terminal; what is left running at the end of the
// test is killed.
func startTTYRun(t *testing.T, args ...string) *ttyRun {
	t.Helper()
	master, slave := openPTY(t)
	r := &ttyRun{master: master, out: newOutput(), read: make(chan struct{}), exited: make(chan struct{})}
	r.cmd = exec.Command(os.Args[0], append([]string{helperArg, "locker"}, args...)...)
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = slave, slave, slave
	// Ctty is the slave's descriptor in the child: its stdin, 0.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child's copies stay: reading the master ends (EIO) once they are closed
	// The terminal's output must be drained, or writers to it block once its buffer is full.
	go func() {
		defer close(r.read)
		_, _ = io.Copy(r.out, master)
	}()
	go func() {
		defer close(r.exited)
		_ = r.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			// locker run leads the session and its process group, where the supervisor and the
			// command are too.
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.exited
		}
	})
	return r
}

// typeKeys writes s to the terminal, as if typed.
func (r *ttyRun) typeKeys(t *testing.T, s string) {
	t.Helper()
	if _, err := r.master.WriteString(s); err != nil {
		t.Fatalf("write %q to the terminal: %v", s, err)
	}
}

// wait waits for locker to exit and the terminal to be read to the end, and returns the exit
// code; it fails the test after 20 seconds.
func (r *ttyRun) wait(t *testing.T) int {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for _, ch := range []chan struct{}{r.exited, r.read} {
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("locker run did not exit and close the terminal within 20s; the terminal shows:\n%s", r.out)
		}
	}
	return r.cmd.ProcessState.ExitCode()
}

// waitCount waits until the count-int helper has printed the line "WORD N" (an "int" or "hup"
// line) with N at least n, whole; it fails the test after 10 seconds. A Ctrl-C flushes what the
// terminal has not yet passed on, and so must wait for whole lines.
func (r *ttyRun) waitCount(t *testing.T, word string, n int) {
	t.Helper()
	line := regexp.MustCompile(`(?m)^(?:\^C)?` + word + ` (\d+)\r?\n`)
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		r.out.mu.Lock()
		lines, changed := line.FindAllStringSubmatch(r.out.buf.String(), -1), r.out.changed
		r.out.mu.Unlock()
		if len(lines) > 0 {
			if got, _ := strconv.Atoi(lines[len(lines)-1][1]); got >= n {
				return
			}
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("the command did not print %q %d within 10s; the terminal shows:\n%s", word, n, r.out)
		}
	}
}

// intsLine is the count-int helper's last line: the number of SIGINTs it got.
var intsLine = regexp.MustCompile(`(?m)^ints (\d+)\r?$`)

// Ctrl-C at the terminal while the command runs: the terminal sends SIGINT to its foreground
// process group, locker run, the supervisor and the command, and locker run does not forward it
// once more. The command sees exactly one SIGINT per Ctrl-C; locker run exits with its status
// and frees the key.
func TestRunTerminalInterrupt(t *testing.T) {
	t.Parallel()
	const ctrlCs = 4
	url := startMiniredis(t)
	r := startTTYRun(t, runArgs(url, "job", nil, child("count-int"))...)
	r.out.waitFor(t, "ready ")
	r.out.waitFor(t, "\n") // the line is complete: the command handles SIGINT
	// A SIGINT that arrives while the command has not yet taken the one before merges with it
	// (signals do not queue), which can hide one sent twice: so, several times. After each,
	// SIGHUP and SIGTERM sent to locker run are forwarded after a forwarded SIGINT, if there was
	// one, through the same pipe and supervisor: the command has counted it when it reports the
	// SIGHUP, before the next Ctrl-C.
	for i := 1; i <= ctrlCs; i++ {
		r.typeKeys(t, "\x03") // VINTR
		r.waitCount(t, "int", i)
		if err := r.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		r.waitCount(t, "hup", i)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := r.wait(t)
	out := r.out.String()
	m := intsLine.FindStringSubmatch(out)
	switch {
	case m == nil:
		t.Fatalf("the command did not report its SIGINTs (exit code %d); the terminal shows:\n%s", code, out)
	case m[1] != strconv.Itoa(ctrlCs):
		t.Errorf("the command got SIGINT %s times for %d Ctrl-C, want %[2]d; the terminal shows:\n%[3]s", m[1], ctrlCs, out)
	}
	if code != 3 {
		t.Errorf("exit code %d, want the command's 3; the terminal shows:\n%s", code, out)
	}
	if st, err := libClient(t, url).Inspect(context.Background(), "job"); err != nil || st.Locked {
		t.Errorf("after run the key is %+v, %v; want free", st, err)
	}
}

// Ctrl-C at the terminal while waiting for the lock ends the wait, 130, as before: the command
// does not run.
func TestRunTerminalInterruptWaiting(t *testing.T) {
	t.Parallel()
	url := startMiniredis(t)
	lease, err := libClient(t, url).Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock()
	r := startTTYRun(t, runArgs(url, "job", []string{"-v"}, child("count-int"))...)
	r.out.waitFor(t, "locker run: getting lock \"job\"\r\n") // whole: Ctrl-C flushes what is not
	r.typeKeys(t, "\x03")
	code := r.wait(t)
	out := r.out.String()
	if code != 128+int(syscall.SIGINT) {
		t.Errorf("exit code %d, want %d; the terminal shows:\n%s", code, 128+int(syscall.SIGINT), out)
	}
	if want := `interrupted by SIGINT while waiting for lock "job"`; !strings.Contains(out, want) {
		t.Errorf("the terminal lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "ready ") {
		t.Errorf("the command ran:\n%s", out)
	}
}
