package main

import (
	"os"
	"testing"
)

// The command of a locker run does not get $LOCKER_REDIS (a nested locker command uses the
// servers of the hold), except under -o, where there is no hold to pass on and the user's
// setting stays: a nested locker run without --redis then reaches the server through it, and
// waits for the outer hold like any other run.
func TestRunKeepsRedisVariableUnderClose(t *testing.T) {
	url := startMiniredis(t)
	t.Setenv(redisEnv, url)
	show := `printf '%s|%s' "${LOCKER_REDIS-unset}" "${LOCKER_HOLDS:+holds}"`

	tio := newIO("", false)
	tio.exec(t, 0, "run", "job", "-c", show)
	if got := tio.stdout.String(); got != "unset|holds" {
		t.Errorf("without -o the command sees %q, want no $LOCKER_REDIS and the hold in $LOCKER_HOLDS", got)
	}

	inner := os.Args[0] + " " + helperArg + " locker run -n job true; echo inner $?"
	tio = newIO("", false)
	tio.exec(t, 0, "run", "-o", "job", "-c", inner)
	if want := "inner 1\n"; tio.stdout.String() != want {
		t.Errorf("-o with $LOCKER_REDIS set: stdout %q, want %q (the nested run reaches the server and finds the key held)\nstderr:\n%s", tio.stdout, want, tio.stderr)
	}
}
