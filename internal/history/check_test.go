package history

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// acq and rel make operations with times in microseconds.
func acq(p int, call, ret int64, token uint64) Op {
	return Op{Process: p, Kind: Acquire, Call: call * 1000, Return: ret * 1000, Token: token, Holds: 1}
}

func rel(p int, call, ret int64) Op {
	return Op{Process: p, Kind: Release, Call: call * 1000, Return: ret * 1000}
}

// A correct history of three processes, whose waiting acquires overlap the holds of others
// (each is granted after the previous release's call), passes every check.
func TestCorrectHistory(t *testing.T) {
	ops := []Op{
		acq(0, 0, 10, 1), rel(0, 20, 30),
		acq(1, 5, 28, 2), rel(1, 40, 45), // waited while p0 held; granted during p0's release
		acq(2, 6, 50, 3), rel(2, 55, 60),
		acq(0, 35, 70, 4), rel(0, 71, 72),
		acq(1, 80, 81, 5), rel(1, 82, 83),
	}
	res := Check(ops, Options{Fenced: true})
	if !res.OK() || res.Linearizable != porcupine.Ok {
		t.Fatalf("a correct history was flagged: %v\n%s", res, strings.Join(res.Violations, "\n"))
	}
	if res.Ops != 10 || res.Processes != 3 || res.Sections != 5 || res.Handoffs != 4 {
		t.Fatalf("counts: %v, want 10 ops, 3 processes, 5 sections, 4 handoffs", res)
	}
}

// Two holds at once are flagged by porcupine and by the overlap check, which names both.
func TestOverlapFlagged(t *testing.T) {
	ops := []Op{
		acq(0, 0, 10, 1), rel(0, 30, 40),
		acq(1, 5, 20, 2), rel(1, 50, 60), // p0 held it from 10 until at least 30
	}
	res := Check(ops, Options{Fenced: true})
	if res.OK() || res.Linearizable != porcupine.Illegal {
		t.Fatalf("overlapping holds were not flagged: %v", res)
	}
	want := "p1 acquired at 0.020ms (token 2) while p0 held the lock from 0.010ms (token 1) until at least 0.030ms"
	if !contains(res.Violations, want) || !contains(res.Violations, "not linearizable") {
		t.Fatalf("violations %q, want the overlap (%q) and porcupine's verdict", res.Violations, want)
	}
}

// Tokens that do not increase with the order of the holds are flagged, though the holds are
// exclusive (porcupine, which does not model tokens, accepts them); so is a missing token.
func TestTokenOrderFlagged(t *testing.T) {
	ops := []Op{
		acq(0, 0, 10, 5), rel(0, 20, 30),
		acq(1, 40, 50, 4), rel(1, 60, 70), // 4 after 5
		acq(0, 80, 90, 0), rel(0, 91, 92), // none
	}
	res := Check(ops, Options{Fenced: true})
	if res.Linearizable != porcupine.Ok {
		t.Fatalf("porcupine: %s, want Ok (exclusion holds)", res.Linearizable)
	}
	if len(res.Violations) != 2 || !contains(res.Violations, "p1: token 4 acquired at") || !contains(res.Violations, "has no fencing token") {
		t.Fatalf("violations %q, want the decreasing token and the missing one", res.Violations)
	}
	if res := Check(ops, Options{}); !res.OK() {
		t.Fatalf("without Fenced, tokens were checked: %q", res.Violations)
	}
}

// Histories that no lock could produce in one process: a re-entry (two holds), a release
// without a hold, overlapping calls of one process.
func TestMalformedFlagged(t *testing.T) {
	for name, c := range map[string]struct {
		ops  []Op
		want string
	}{
		"two holds":      {[]Op{{Process: 0, Kind: Acquire, Call: 0, Return: 1, Token: 1, Holds: 2}}, "reported 2 holds"},
		"release first":  {[]Op{rel(0, 0, 1)}, "release at 0.000ms without a hold"},
		"acquire twice":  {[]Op{acq(0, 0, 1, 1), acq(0, 2, 3, 2)}, "while it held the lock"},
		"calls overlap":  {[]Op{acq(0, 0, 10, 1), rel(0, 5, 20)}, "while its acquire"},
		"return first":   {[]Op{acq(0, 10, 5, 1)}, "before it was called"},
		"unknown kind":   {[]Op{{Process: 0, Kind: "renew", Call: 0, Return: 1}}, "unknown operation"},
		"another holder": {[]Op{acq(0, 0, 1, 1), rel(1, 2, 3)}, "p1: release"},
	} {
		t.Run(name, func(t *testing.T) {
			res := Check(c.ops, Options{Fenced: true, Timeout: 10 * time.Second})
			if !contains(res.Violations, c.want) {
				t.Fatalf("violations %q, want one containing %q", res.Violations, c.want)
			}
		})
	}
}

// Past maxReported violations of a kind, Check counts the rest.
func TestViolationsCapped(t *testing.T) {
	var ops []Op
	for i := range int64(30) { // 30 processes, all holding at once
		ops = append(ops, acq(int(i), i, 100+i, uint64(i+1)), rel(int(i), 200+i, 300+i))
	}
	res := Check(ops, Options{Fenced: true})
	if len(res.Violations) != maxReported+2 || !contains(res.Violations, `… and 19 more of kind "overlap"`) {
		t.Fatalf("violations %q, want %d overlaps, a count of 19 more and porcupine's verdict", res.Violations, maxReported)
	}
}

// Histories written by Recorders are read back merged, and Visualize writes porcupine's HTML
// with the violations annotated.
func TestRecordReadVisualize(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for p := range 2 {
		r := NewRecorder(p)
		call := Now()
		r.Acquired(call, 7, 1) // one after the other, but both with token 7
		call = Now()
		r.Released(call)
		path := filepath.Join(dir, fmt.Sprintf("p%d.jsonl", p))
		if err := r.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	ops, err := ReadFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4 || ops[0].Process != 0 || ops[2].Process != 1 || ops[1].Kind != Release || ops[0].Token != 7 {
		t.Fatalf("read back %+v", ops)
	}
	for _, op := range ops {
		if op.Return < op.Call {
			t.Fatalf("%+v returned before it was called", op)
		}
	}
	res := Check(ops, Options{Fenced: true})
	if !contains(res.Violations, "does not exceed token 7") {
		t.Fatalf("violations %q, want the repeated token", res.Violations)
	}
	path, err := res.Visualize(dir)
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "does not exceed token 7") || !strings.Contains(string(html), "p1 acquire") {
		t.Fatalf("%s lacks the violation or the operations (%d bytes)", path, len(html))
	}
	if _, err := ReadFiles(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("ReadFiles of a missing file: no error")
	}
}

func contains(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
