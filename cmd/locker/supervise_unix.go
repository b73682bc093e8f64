//go:build unix

package main

// locker run's supervisor. The locker run process (P), which holds the lease, does not start the
// command (C) itself: it starts the same binary again as a supervisor (S), marked by
// supervisorEnv, which starts C and stays its parent:
//
//	P (lease, watchdog) --control pipe--> S (subreaper) --> C --> C's descendants
//
// S gets the read end of a control pipe as fd 3; P keeps the write end (close-on-exec, so C
// never has it) and writes one message a line:
//
//	signal N          forward signal N to C (P got it: SIGINT, SIGTERM, SIGHUP, SIGQUIT)
//	terminate GRACE   the lease was lost: SIGTERM to C and all of S's descendants, SIGKILL to
//	                  all after GRACE
//
// End of file on the pipe while C runs means that P died (kill -9, the OOM killer): P keeps the
// pipe open until S has exited. S then ends the whole tree, SIGTERM and SIGKILL after the
// shorter of --grace and --ttl/3, so it is gone before the lease (renewed every ttl/3 until P
// died) can expire. On Linux, S is a child subreaper, so the descendants that C orphans stay
// under S and are found and ended too (by a walk of /proc), and C has SIGKILL as its parent-death
// signal, so that C dies if S is killed.
//
// When C exits, S ends what C left running in the background (SIGTERM, SIGKILL after --grace):
// nothing the command started runs on after the lock is released. S exits with C's status as a
// shell reports it (128+N when signal N killed C), and P releases the lock only after S has
// exited.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// supervised is the command started through the supervisor, seen from locker run.
type supervised struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	ctl *os.File // the write end of the control pipe; nil once the supervisor has exited
}

// startCommand starts the supervisor, which starts argv with env and s's streams.
func startCommand(s *streams, cfg runConfig, argv, env []string) (runningCommand, error) {
	exe, err := supervisorPath()
	if err != nil {
		return nil, fmt.Errorf("start the supervisor: %w", err)
	}
	r, w, err := os.Pipe() // both ends close-on-exec; ExtraFiles makes r fd 3 of the supervisor
	if err != nil {
		return nil, fmt.Errorf("start the supervisor: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Args = append([]string{"locker-run-supervisor", cfg.TTL.String(), cfg.Grace.String()}, argv...)
	cmd.Env = append(slices.Clone(env), supervisorEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.in, s.out, s.err
	cmd.ExtraFiles = []*os.File{r}
	cmd.WaitDelay = time.Second // the tree is gone when the supervisor exits; do not hang on a pipe
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the supervisor: %w", err)
	}
	return &supervised{cmd: cmd, ctl: w}, nil
}

// send writes a control message to the supervisor.
func (p *supervised) send(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctl != nil {
		fmt.Fprintf(p.ctl, format+"\n", args...)
	}
}

// Signal asks the supervisor to forward sig to the command.
func (p *supervised) Signal(sig os.Signal) {
	if n := signalNumber(sig); n > 0 {
		p.send("signal %d", n)
	}
}

// Terminate asks the supervisor to end the command's tree: SIGTERM, SIGKILL after grace.
func (p *supervised) Terminate(grace time.Duration) { p.send("terminate %s", grace) }

// Wait waits for the supervisor, then closes the control pipe. The supervisor's exit status is
// the command's.
func (p *supervised) Wait() (int, error) {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.ctl.Close()
	p.ctl = nil
	p.mu.Unlock()
	ps := p.cmd.ProcessState
	if ps == nil {
		return exitCannotRun, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Errorf("the supervisor of the command died of %v", ws.Signal())
	}
	return ps.ExitCode(), nil
}

// superviseMain is the supervisor: os.Args is [name, TTL, GRACE, command...], fd 3 is the
// control pipe. It returns the exit status.
func superviseMain() int {
	os.Unsetenv(supervisorEnv) // not for the command: a locker inside it is a locker
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "locker run: supervisor: bad arguments (it is started by locker run)")
		return exitCannotRun
	}
	ttl, err1 := time.ParseDuration(os.Args[1])
	grace, err2 := time.ParseDuration(os.Args[2])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "locker run: supervisor: bad arguments (it is started by locker run)")
		return exitCannotRun
	}
	argv := os.Args[3:]
	syscall.CloseOnExec(3)
	ctl := os.NewFile(3, "locker run control")
	if err := setSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "locker run: supervisor: %v\n", err)
	}
	// The signals of a terminal reach the whole process group, the supervisor too: it lets
	// locker run decide (which forwards them), and must not die of them. Those ignored from the
	// start (nohup) stay ignored, so that the command inherits that.
	sigs := make(chan os.Signal, 8)
	if handled := handledSignals(); len(handled) > 0 {
		signal.Notify(sigs, handled...)
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = commandAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "locker run: %v\n", err)
		return startFailure(err)
	}
	sv := &supervisor{cmd: cmd, ttl: ttl, grace: grace, sigs: sigs}
	return sv.loop(readLines(ctl), reap())
}

// readLines sends the lines read from f, and closes the channel at its end.
func readLines(f *os.File) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// A reaped is a child process that exited, with its status.
type reaped struct {
	pid    int
	status syscall.WaitStatus
}

// reap waits for the children of the process, the command and the orphans re-parented to the
// subreaper, and sends each one that exits; it closes the channel when none is left.
func reap() <-chan reaped {
	ch := make(chan reaped)
	go func() {
		defer close(ch)
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			switch {
			case err == syscall.EINTR:
				continue
			case err != nil: // ECHILD: no child left, and none can appear
				return
			}
			ch <- reaped{pid, ws}
		}
	}()
	return ch
}

// supervisor is the state of the supervisor process.
type supervisor struct {
	cmd        *exec.Cmd
	ttl, grace time.Duration
	sigs       <-chan os.Signal

	exited bool // the command exited
	status int  // its exit status, once exited

	kill     *time.Timer // SIGKILL to the tree, when armed
	killAt   time.Time
	killing  <-chan time.Time // rounds of SIGKILL until no process is left
	killNote string           // what to say when the SIGKILL comes
}

// loop runs until the command and every descendant have exited, and returns the command's exit
// status.
func (sv *supervisor) loop(lines <-chan string, children <-chan reaped) int {
	var killC <-chan time.Time
	for {
		select {
		case <-sv.sigs:
			// Dropped: locker run forwards what it gets (see superviseMain).
		case line, ok := <-lines:
			if !ok {
				lines = nil
				after := min(sv.grace, sv.ttl/3)
				fmt.Fprintf(os.Stderr, "locker run: locker run died; ending the command and its processes (SIGTERM, then SIGKILL after %v)\n", after)
				sv.signalTree(syscall.SIGTERM)
				killC = sv.armKill(after, "")
				continue
			}
			verb, arg, _ := strings.Cut(line, " ")
			switch verb {
			case "signal":
				if n, err := strconv.Atoi(arg); err == nil && !sv.exited {
					_ = sv.cmd.Process.Signal(syscall.Signal(n))
				}
			case "terminate":
				grace, err := time.ParseDuration(arg)
				if err != nil {
					grace = sv.grace
				}
				sv.signalTree(syscall.SIGTERM)
				killC = sv.armKill(grace, fmt.Sprintf("locker run: the command did not exit within %v of SIGTERM; sending SIGKILL", grace))
			}
		case c, ok := <-children:
			if !ok {
				return sv.status
			}
			if c.pid != sv.cmd.Process.Pid {
				continue // an orphan re-parented to the subreaper
			}
			sv.exited, sv.status = true, statusOf(c.status)
			if sv.kill == nil {
				if left := descendants(); len(left) > 0 {
					what := fmt.Sprintf("%d processes", len(left))
					if len(left) == 1 {
						what = "1 process"
					}
					fmt.Fprintf(os.Stderr, "locker run: the command exited, leaving %s; ending them before the lock is released (SIGTERM, then SIGKILL after %v)\n", what, sv.grace)
					sv.signalTree(syscall.SIGTERM)
					killC = sv.armKill(sv.grace, fmt.Sprintf("locker run: the command's processes did not exit within %v of SIGTERM; sending SIGKILL", sv.grace))
				}
			}
		case <-killC:
			killC = nil
			if sv.killNote != "" {
				fmt.Fprintln(os.Stderr, sv.killNote)
			}
			sv.signalTree(syscall.SIGKILL)
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			sv.killing = t.C
		case <-sv.killing:
			sv.signalTree(syscall.SIGKILL) // what forked since the last round
		}
	}
}

// armKill arranges for SIGKILL to the tree after d, unless it is already due sooner, and returns
// the timer's channel. note is printed then.
func (sv *supervisor) armKill(d time.Duration, note string) <-chan time.Time {
	at := time.Now().Add(d)
	if sv.kill != nil {
		if !at.Before(sv.killAt) {
			return sv.kill.C
		}
		sv.kill.Stop()
	}
	sv.kill, sv.killAt, sv.killNote = time.NewTimer(d), at, note
	return sv.kill.C
}

// signalTree sends sig to the command and every descendant of the supervisor.
func (sv *supervisor) signalTree(sig syscall.Signal) {
	pids := descendants()
	if !sv.exited && !slices.Contains(pids, sv.cmd.Process.Pid) {
		_ = sv.cmd.Process.Signal(sig)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// statusOf is a wait status as a shell reports it: 128+N when signal N killed the process.
func statusOf(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
