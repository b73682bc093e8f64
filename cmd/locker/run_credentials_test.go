//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashlock/locker/internal/testkit/redistest"
)

// locker run takes the password from $LOCKER_REDIS_PASSWORD, and passes neither it nor
// $LOCKER_REDIS to the command; a locker run inside the command, without --redis, finds the
// server in $LOCKER_HOLDS (and the password in --redis-password-file) and re-enters the hold.
func TestRunCredentials(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	srv.Do(t, "CONFIG", "SET", "requirepass", "hunter2")
	url := "redis://" + srv.Addr
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := os.Args[0] + " " + helperArg
	nested := bin + " locker run -n --redis-password-file " + pwFile + " job -- " + bin + " holds redis://:hunter2@" + srv.Addr + " job"
	script := "env; echo ---; " + nested + "; echo inner $?"
	cmd, stdout, stderr, exited := lockerProcess(t, []string{redisEnv + "=" + url, passwordEnv + "=hunter2"}, "run", "job", "-c", script)
	if code := waitExit(t, cmd, exited); code != 0 {
		t.Fatalf("locker run with %s: exit %d\nstdout:\n%s\nstderr:\n%s", passwordEnv, code, stdout, stderr)
	}
	env, after, ok := strings.Cut(stdout.String(), "---\n")
	if !ok {
		t.Fatalf("the command did not run its script: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	for line := range strings.Lines(env) {
		if strings.HasPrefix(line, redisEnv+"=") || strings.HasPrefix(line, passwordEnv+"=") {
			t.Errorf("the command's environment has %s", strings.TrimSpace(line))
		}
	}
	if strings.Contains(env, "hunter2") {
		t.Errorf("the command's environment shows the password:\n%s", env)
	}
	if !strings.Contains(env, holdsEnv+"=") {
		t.Errorf("the command's environment lacks %s:\n%s", holdsEnv, env)
	}
	if want := "holds 2\ninner 0\n"; after != want {
		t.Errorf("nested run: stdout %q, want %q (it re-enters the hold on the server of %s)\nstderr:\n%s", after, want, holdsEnv, stderr)
	}

	// Without the password, the server refuses.
	tio := newIO("", false)
	tio.exec(t, exitUnavailable, "run", "--redis", url, "job", "true")
	if !strings.Contains(tio.stderr.String(), "NOAUTH") {
		t.Errorf("without a password: stderr %q, want NOAUTH", tio.stderr)
	}
	// --redis-password-file, and the password in the URL, work too.
	newIO("", false).exec(t, 0, "run", "--redis", url, "--redis-password-file", pwFile, "job", "true")
	newIO("", false).exec(t, 0, "run", "--redis", "redis://:hunter2@"+srv.Addr, "job", "true")
}
