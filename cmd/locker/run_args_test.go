package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// parseRun parses the arguments of locker run as the command does, and returns the configuration
// and the command line to run.
func parseRun(args []string) (runConfig, []string, error) {
	fs := flag.NewFlagSet("locker run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := newRunConfig()
	cfg.define(fs)
	addConnFlags(fs, false)
	pos, err := runCommand.parse(fs, args)
	if err != nil {
		return cfg, nil, err
	}
	argv, err := cfg.positional(pos)
	if err != nil {
		return cfg, nil, err
	}
	return cfg, argv, cfg.validate()
}

// TestRunArgs checks the forms of locker run's command line: flock(1)'s and the long ones.
func TestRunArgs(t *testing.T) {
	t.Parallel()
	sh := shellCommand
	for _, tc := range []struct {
		args []string
		key  string
		argv []string
		wait time.Duration
		code int // conflict exit code
		// check looks at the rest of the configuration; nil for nothing.
		check func(runConfig) bool
	}{
		{args: []string{"k", "cmd", "a"}, key: "k", argv: []string{"cmd", "a"}, wait: waitForever, code: 1},
		{args: []string{"k", "cmd", "-n"}, key: "k", argv: []string{"cmd", "-n"}, wait: waitForever, code: 1},
		{args: []string{"k", "--", "cmd", "-n"}, key: "k", argv: []string{"cmd", "-n"}, wait: waitForever, code: 1},
		{args: []string{"-n", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 0, code: 1},
		{args: []string{"--nonblock", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 0, code: 1},
		{args: []string{"--nb", "-w", "5", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 0, code: 1},
		{args: []string{"-w", "0.5", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 500 * time.Millisecond, code: 1},
		{args: []string{"-w", "1m30s", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 90 * time.Second, code: 1},
		{args: []string{"--wait=2", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 2 * time.Second, code: 1},
		{args: []string{"--timeout", "0", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 0, code: 1},
		{args: []string{"--wait", "-1s", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1},
		{args: []string{"-E", "3", "-n", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 0, code: 3},
		{args: []string{"--conflict-exit-code=0", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 0},
		{args: []string{"k", "-c", "echo hi"}, key: "k", argv: sh("echo hi"), wait: waitForever, code: 1},
		{args: []string{"k", "--command", "echo hi"}, key: "k", argv: sh("echo hi"), wait: waitForever, code: 1},
		{args: []string{"-c", "echo hi", "k"}, key: "k", argv: sh("echo hi"), wait: waitForever, code: 1},
		{args: []string{"--key", "k", "--", "cmd", "-n"}, key: "k", argv: []string{"cmd", "-n"}, wait: waitForever, code: 1},
		{args: []string{"--key", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1},
		{args: []string{"--key", "k", "-c", "x"}, key: "k", argv: sh("x"), wait: waitForever, code: 1},
		{args: []string{"--key=-n", "--", "cmd"}, key: "-n", argv: []string{"cmd"}, wait: waitForever, code: 1},
		{args: []string{"-x", "-e", "--exclusive", "-v", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return c.Verbose && !c.Shared && !c.Fair }},
		{args: []string{"-s", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return c.Shared && !c.Fair && c.Limit == 0 }},
		{args: []string{"--limit", "3", "--fair", "-n", "k", "cmd", "--limit", "2"}, key: "k", argv: []string{"cmd", "--limit", "2"}, wait: 0, code: 1,
			check: func(c runConfig) bool { return c.Limit == 3 && c.Fair && !c.Shared }},
		{args: []string{"--shared", "--fair", "-n", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: 0, code: 1,
			check: func(c runConfig) bool { return c.Shared && c.Fair }},
		// The last of -s and -x wins, as with flock(1).
		{args: []string{"-s", "-x", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return !c.Shared }},
		{args: []string{"--exclusive", "--shared", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return c.Shared }},
		{args: []string{"-s=false", "--fair", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return !c.Shared && c.Fair }},
		{args: []string{"k", "cmd", "-s"}, key: "k", argv: []string{"cmd", "-s"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return !c.Shared }}, // the command's -s
		{args: []string{"-o", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool { return c.Close }},
		{args: []string{"--ttl", "3s", "--grace=1s", "--fencing", "--owner-label", "nightly job", "k", "cmd"}, key: "k", argv: []string{"cmd"}, wait: waitForever, code: 1,
			check: func(c runConfig) bool {
				return c.TTL == 3*time.Second && c.Grace == time.Second && c.Fencing && c.OwnerLabel == "nightly job"
			}},
	} {
		cfg, argv, err := parseRun(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if cfg.Key != tc.key || !slices.Equal(argv, tc.argv) || cfg.Wait != tc.wait || cfg.ConflictCode != tc.code {
			t.Errorf("%q: key %q, command %q, wait %v, -E %d; want %q, %q, %v, %d", tc.args, cfg.Key, argv, cfg.Wait, cfg.ConflictCode, tc.key, tc.argv, tc.wait, tc.code)
		}
		if tc.check != nil && !tc.check(cfg) {
			t.Errorf("%q: %+v", tc.args, cfg)
		}
	}
}

// TestRunArgsErrors checks that a bad command line is a usage error of one line.
func TestRunArgsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no key given"},
		{[]string{"k"}, "no command given"},
		{[]string{"--key", "k"}, "no command given"},
		{[]string{"k", "--"}, "no command given"},
		{[]string{"k", "-c"}, "-c takes exactly one command line"},
		{[]string{"k", "-c", "a", "b"}, "-c takes exactly one command line"},
		{[]string{"-c", "x", "k", "cmd"}, "both -c and a command given"},
		{[]string{"-c", "x", "k", "-c", "y"}, "-c given twice"},
		{[]string{"-w", "soon", "k", "cmd"}, `invalid value "soon" for flag -w: want seconds (0.5, 60) or a duration (1m30s)`},
		{[]string{"-w", "NaN", "k", "cmd"}, `invalid value "NaN" for flag -w`},
		{[]string{"-w", "1e300", "k", "cmd"}, `invalid value "1e300" for flag -w`},
		{[]string{"-E", "300", "k", "cmd"}, "-E 300: must be 0 to 255"},
		{[]string{"-E", "x", "k", "cmd"}, `invalid value "x" for flag -E`},
		{[]string{"--owner-label", "a\tb", "k", "cmd"}, `--owner-label: invalid argument: owner label "a\tb" has a control character`},
		{[]string{"--owner-label", strings.Repeat("a", 300), "k", "cmd"}, "--owner-label: invalid argument: owner label must be 1 to 256 bytes, got 300"},
		{[]string{"-u", "k", "cmd"}, "flag provided but not defined: -u"},
		{[]string{"-nE", "3", "k", "cmd"}, "flag provided but not defined: -nE"},
		{[]string{"--ttl", "0s", "k", "cmd"}, "--ttl 0s: must be at least 1ms"},
		{[]string{"--grace=-1s", "k", "cmd"}, "--grace -1s: must not be negative"},
	} {
		_, _, err := parseRun(tc.args)
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.args, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %q, want one line with %q", tc.args, err, tc.want)
		}
		var ue *usageError
		if !errors.As(err, &ue) && !strings.Contains(err.Error(), "flag") {
			t.Errorf("%q: %v is not a usage error", tc.args, err)
		}
	}
}

// The servers of a hold are named without credentials and whatever the spelling of the URL.
func TestServerIDs(t *testing.T) {
	t.Parallel()
	got := serverIDs(&connFlags{urls: urlList{"redis://u:secret@Host.example", "rediss://h2:7000/3", "redis://[::1]:6380/"}})
	want := []string{"redis://[::1]:6380/0", "redis://host.example:6379/0", "rediss://h2:7000/3"}
	if !slices.Equal(got, want) {
		t.Errorf("serverIDs = %q, want %q", got, want)
	}
	for _, id := range got {
		if strings.Contains(id, "secret") {
			t.Errorf("%q holds the password", id)
		}
	}
}
