package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// locker bench on the embedded miniredis, briefly: it says its timings are not Redis timings,
// prints a table with every scenario, and writes JSON that parses.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario")
	}
	file := filepath.Join(t.TempDir(), "bench.json")
	tio := newIO("", false)
	tio.exec(t, 0, "bench", "--time", "20ms", "--driver", "memory,goredis", "--leases", "50", "--json", file)
	out := tio.stdout.String() + tio.stderr.String()
	for _, want := range []string{"not Redis timings", "uncontended", "contention-shared", "contention-separate", "reentry-3", "watchdog", "floor", "many-hot-keys", "conns/client"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var results any
	if err := json.Unmarshal(data, &results); err != nil {
		t.Fatalf("--json wrote invalid JSON: %v\n%s", err, data)
	}
}

// Bad flags are usage errors.
func TestBenchUsage(t *testing.T) {
	newIO("", false).exec(t, 2, "bench", "--driver", "nosuch")
	newIO("", false).exec(t, 2, "bench", "--goroutines", "0")
	newIO("", false).exec(t, 2, "bench", "--keys", "0")
}
