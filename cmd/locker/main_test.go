package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// testConfig is a short demo. The watchdog renews every ttl/3 (20ms) and the re-entry comes at
// 30ms, halfway between two renewals: a re-entry during a renewal's round trip trips a data race
// inside the locker package (Client.renew reads hold.validUntil without Client.mu), which
// go test -race reports.
var testConfig = demoConfig{TTL: 60 * time.Millisecond, Work: 30 * time.Millisecond, Rounds: 2}

func TestDemo(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := runDemo(context.Background(), &out, testConfig)
	t.Logf("output:\n%s", &out)
	if err != nil {
		t.Fatalf("runDemo: %v", err)
	}
	text := out.String()
	if first, _, _ := strings.Cut(text, "\n"); !strings.Contains(first, "in-process memory") {
		t.Errorf("first line %q does not name the memory backend", first)
	}
	for _, want := range []string{
		"exclusion held: 4 critical sections",
		"re-entered (holds 2)",
		"renewed \"demo:invoice\"",
		"waited ",
		"released inner",
		"released outer",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestCheckFindsViolations(t *testing.T) {
	t.Parallel()
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	sections := []section{
		{"A", at(0), at(10)},
		{"B", at(10), at(20)}, // touching is fine: [0,10) and [10,20)
		{"A", at(25), at(40)},
		{"B", at(35), at(50)}, // overlaps A's second section
	}
	var out bytes.Buffer
	tl := &timeline{w: &out, start: start}
	err := check(tl, sections, locker.State{Locked: true, Holds: 1, TTL: time.Second}, 3, 0)
	if err == nil {
		t.Fatalf("check passed; output:\n%s", &out)
	}
	for _, want := range []string{
		"overlap: A [25ms, 40ms) and B [35ms, 50ms)",
		"still locked",
		"worker A completed 2 of 3 rounds",
		"never renewed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if n := strings.Count(out.String(), "overlap"); n != 1 {
		t.Errorf("%d overlaps reported, want 1:\n%s", n, &out)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a substring of the expected stdout
		stderr string // a substring of the expected stderr
	}{
		{args: nil, code: 2, stderr: "The commands are"},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"--help"}, code: 0, stdout: "demo"},
		{args: []string{"help"}, code: 0, stdout: "demo"},
		{args: []string{"demo", "--help"}, code: 0, stdout: "-ttl"},
		{args: []string{"demo", "--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"demo", "--ttl", "soon"}, code: 2, stderr: "invalid value"},
		{args: []string{"demo", "--ttl", "0s"}, code: 2, stderr: "--ttl 0s: must be at least 1ms"},
		{args: []string{"demo", "--rounds", "0"}, code: 2, stderr: "--rounds 0: must be at least 1"},
		{args: []string{"demo", "--work", "10ms"}, code: 2, stderr: "--work 10ms: must be more than a third of --ttl 200ms"},
		{args: []string{"demo", "extra"}, code: 2, stderr: "unexpected arguments: extra"},
		{args: []string{"demo", "--ttl=60ms", "--work=30ms", "--rounds=1"}, code: 0, stdout: "exclusion held: 2 critical sections"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("run(%q) = %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, &stdout, &stderr)
			continue
		}
		if !strings.Contains(stdout.String(), tc.stdout) {
			t.Errorf("run(%q): stdout lacks %q:\n%s", tc.args, tc.stdout, &stdout)
		}
		if !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("run(%q): stderr lacks %q:\n%s", tc.args, tc.stderr, &stderr)
		}
		if tc.code == 2 && stdout.Len() > 0 {
			t.Errorf("run(%q): a usage error printed to stdout:\n%s", tc.args, &stdout)
		}
	}
}
