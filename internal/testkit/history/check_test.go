package history

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// racq and rrel make shared operations with times in microseconds.
func racq(p int, call, ret int64, token uint64) Op {
	op := acq(p, call, ret, token)
	op.Shared = true
	return op
}

func rrel(p int, call, ret int64) Op {
	op := rel(p, call, ret)
	op.Shared = true
	return op
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

// A correct readers/writer history passes every check: readers overlap each other (three at
// once), a writer waits while they read and is granted after the last one's release, readers
// arriving meanwhile wait behind it and report its token, and the first readers, before any
// writer, report a token below the first writer's.
func TestReadersWriterHistory(t *testing.T) {
	ops := []Op{
		racq(0, 0, 10, 0), rrel(0, 30, 35),
		racq(1, 5, 12, 0), rrel(1, 40, 45),
		racq(2, 8, 20, 0), rrel(2, 25, 28), // p0, p1, p2 all held it from 20 to 25
		acq(3, 15, 50, 7), rel(3, 60, 65), // waited for the readers; granted during p1's release
		racq(0, 36, 70, 7), rrel(0, 80, 85), // waited behind the writer
		racq(2, 55, 72, 7), rrel(2, 75, 90),
		acq(4, 62, 95, 9), rel(4, 100, 101),
		racq(1, 96, 102, 9), rrel(1, 103, 104),
	}
	res := Check(ops, Options{Fenced: true})
	if !res.OK() || res.Linearizable != porcupine.Ok {
		t.Fatalf("a correct history was flagged: %v\n%s", res, strings.Join(res.Violations, "\n"))
	}
	if res.Ops != 16 || res.Processes != 5 || res.Sections != 8 || res.SharedSections != 6 || res.MaxShared != 3 {
		t.Fatalf("counts: %v, want 16 ops, 5 processes, 8 sections of which 6 shared, 3 at once", res)
	}
	if !strings.Contains(res.String(), "(6 shared, up to 3 at once)") {
		t.Fatalf("String() = %q lacks the shared sections", res)
	}
}

// Readers that certainly overlap pass, however long; the same history with one of them a
// writer is flagged by porcupine and by the overlap check, whichever comes first.
func TestReadersOverlapWritersDoNot(t *testing.T) {
	readers := []Op{
		racq(0, 0, 10, 0), rrel(0, 100, 110),
		racq(1, 5, 20, 0), rrel(1, 30, 40),
		racq(2, 50, 60, 0), rrel(2, 70, 80),
	}
	if res := Check(readers, Options{Fenced: true}); !res.OK() || res.MaxShared != 2 {
		t.Fatalf("overlapping readers were flagged, or not counted: %v\n%s", res, strings.Join(res.Violations, "\n"))
	}
	for name, c := range map[string]struct {
		writer int // the process that writes instead of reading
		want   string
	}{
		"reader during a writer": {0, "p1 acquired shared at 0.020ms (token 0) while p0 held the lock from 0.010ms (token 5) until at least 0.100ms"},
		"writer during a reader": {1, "p1 acquired at 0.020ms (token 5) while p0 held the lock shared from 0.010ms (token 0) until at least 0.100ms"},
		"writer after readers":   {2, "p2 acquired at 0.060ms (token 5) while p0 held the lock shared"},
	} {
		t.Run(name, func(t *testing.T) {
			ops := slices.Clone(readers)
			for i := range ops {
				if ops[i].Process == c.writer {
					ops[i].Shared = false
					if ops[i].Kind == Acquire {
						ops[i].Token = 5
					}
				}
			}
			res := Check(ops, Options{})
			if res.Linearizable != porcupine.Illegal || !contains(res.Violations, c.want) {
				t.Fatalf("porcupine: %s, want Illegal; violations %q, want %q", res.Linearizable, res.Violations, c.want)
			}
		})
	}
}

// With fencing, readers report the token of the writer before them, and writers' tokens
// increase, readers' not counting: a reader with another token, a writer whose token does not
// exceed the writer's before it, and an early reader whose token is not below the first
// writer's are flagged; porcupine, which does not model tokens, accepts them all.
func TestSharedTokensFlagged(t *testing.T) {
	ops := []Op{
		racq(0, 0, 10, 3), rrel(0, 20, 30), // 3, not below 3
		acq(1, 40, 50, 3), rel(1, 60, 70),
		racq(0, 80, 90, 3), rrel(0, 91, 92), // right
		racq(2, 85, 93, 4), rrel(2, 94, 95), // 4, not 3
		acq(1, 100, 110, 3), rel(1, 120, 130), // 3 after 3
	}
	res := Check(ops, Options{Fenced: true})
	if res.Linearizable != porcupine.Ok {
		t.Fatalf("porcupine: %s, want Ok (exclusion holds)", res.Linearizable)
	}
	for _, want := range []string{
		"p0: shared token 3 acquired at 0.010ms is not below token 3 of the first exclusive section after it (p1, acquired at 0.050ms)",
		"p2: shared token 4 acquired at 0.093ms is not token 3 of the exclusive section before it (p1, acquired at 0.050ms)",
		"p1: token 3 acquired at 0.110ms does not exceed token 3 of the section before it (p1, acquired at 0.050ms)",
	} {
		if !contains(res.Violations, want) {
			t.Errorf("violations %q lack %q", res.Violations, want)
		}
	}
	if len(res.Violations) != 3 {
		t.Fatalf("violations %q, want 3", res.Violations)
	}
}

// The model's states: readers join and leave a shared lock in any order (the state depends on
// the set only, with process numbers past a byte's bits), a writer needs it free, a release
// must name the kind held and come from a holder.
func TestLockModel(t *testing.T) {
	step := func(s any, p int, kind Kind, shared bool) (bool, any) {
		return LockModel.Step(s, lockInput{kind: kind, shared: shared, process: p}, lockOutput{holds: 1})
	}
	must := func(ok bool, s any) any {
		t.Helper()
		if !ok {
			t.Fatalf("illegal step to %s", LockModel.DescribeState(s))
		}
		return s
	}
	init := LockModel.Init()
	a := must(step(init, 1, Acquire, true))
	a = must(step(a, 9, Acquire, true))
	b := must(step(init, 9, Acquire, true))
	b = must(step(b, 1, Acquire, true))
	if !LockModel.Equal(a, b) || LockModel.Hash(a) != LockModel.Hash(b) || LockModel.DescribeState(a) != "shared by p1, p9" {
		t.Fatalf("the same readers in another order: %q and %q", LockModel.DescribeState(a), LockModel.DescribeState(b))
	}
	for _, c := range []struct {
		p      int
		kind   Kind
		shared bool
	}{{2, Acquire, false}, {1, Acquire, true}, {1, Release, false}, {2, Release, true}} {
		if ok, _ := step(a, c.p, c.kind, c.shared); ok {
			t.Fatalf("p%d %s (shared %v) on a lock shared by p1 and p9 was legal", c.p, c.kind, c.shared)
		}
	}
	a = must(step(a, 9, Release, true))
	a = must(step(a, 1, Release, true))
	if !LockModel.Equal(a, init) || LockModel.Hash(a) != LockModel.Hash(init) || LockModel.DescribeState(a) != "free" {
		t.Fatalf("after the readers left: %q, want free", LockModel.DescribeState(a))
	}
	w := must(step(a, 2, Acquire, false))
	for _, c := range []struct {
		p      int
		kind   Kind
		shared bool
	}{{3, Acquire, false}, {3, Acquire, true}, {2, Acquire, true}, {2, Release, true}, {3, Release, false}} {
		if ok, _ := step(w, c.p, c.kind, c.shared); ok {
			t.Fatalf("p%d %s (shared %v) on a lock held by p2 was legal", c.p, c.kind, c.shared)
		}
	}
	if ok, _ := LockModel.Step(init, lockInput{kind: Acquire, shared: true, process: 0}, lockOutput{holds: 2}); ok {
		t.Fatal("a shared acquire reporting 2 holds was legal")
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
		"kinds mixed":    {[]Op{racq(0, 0, 1, 0), rel(0, 2, 3)}, "p0: release at 0.002ms of its shared acquire"},
		"shared twice":   {[]Op{racq(0, 0, 1, 0), racq(0, 2, 3, 0)}, "while it held the lock"},
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
		call = Now()
		r.AcquiredShared(call, 7, 1)
		call = Now()
		r.ReleasedShared(call)
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
	if len(ops) != 8 || ops[0].Process != 0 || ops[4].Process != 1 || ops[1].Kind != Release || ops[0].Token != 7 ||
		ops[1].Shared || !ops[2].Shared || !ops[3].Shared || ops[3].Kind != Release {
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
	if !strings.Contains(string(html), "does not exceed token 7") || !strings.Contains(string(html), "p1 acquire") ||
		!strings.Contains(string(html), "p1 acquire shared") {
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

// pacq and prel make operations of a semaphore of n permits with times in microseconds.
func pacq(n, p int, call, ret int64, token uint64) Op {
	op := acq(p, call, ret, token)
	op.Limit = n
	return op
}

func prel(n, p int, call, ret int64) Op {
	op := rel(p, call, ret)
	op.Limit = n
	return op
}

// A correct history of a semaphore of 2 passes every check: two holders at once, waiters
// granted during a release, and tokens that increase with real-time order but not with the
// order of the acquires' returns: p1's acquire and p2's overlap, p2 returned first with the
// larger token (p1 drew first and returned later), which a lock's check of tokens in the order
// of the holds would flag.
func TestSemaphoreHistory(t *testing.T) {
	const n = 2
	ops := []Op{
		pacq(n, 1, 1, 20, 2), prel(n, 1, 30, 35),
		pacq(n, 2, 2, 10, 3), prel(n, 2, 36, 38), // p1's and p2's acquires overlap; p2 returned first
		pacq(n, 3, 12, 32, 4), prel(n, 3, 50, 55), // waited while p1 and p2 held; granted during p1's release
		pacq(n, 0, 25, 37, 5), prel(n, 0, 40, 45), // granted during p2's release
		pacq(n, 1, 36, 47, 6), prel(n, 1, 60, 61), // granted during p0's release
		pacq(n, 0, 48, 52, 7), prel(n, 0, 53, 54), // granted during p3's release, called at 50
	}
	res := Check(ops, Options{Fenced: true})
	if !res.OK() || res.Linearizable != porcupine.Ok {
		t.Fatalf("a correct history was flagged: %v\n%s", res, strings.Join(res.Violations, "\n"))
	}
	if res.Ops != 12 || res.Processes != 4 || res.Sections != 6 || res.Limit != n || res.MaxHeld != n {
		t.Fatalf("counts: %v, want 12 ops, 4 processes, 6 sections, a semaphore of 2 held twice at once", res)
	}
	if !strings.Contains(res.String(), "(of a semaphore of 2, up to 2 at once)") {
		t.Fatalf("String() = %q lacks the semaphore", res)
	}
	// The order of tokens that the lock's check wants, in a semaphore's history, is not asked.
	if lock := Check(dropLimits(ops), Options{Fenced: true}); lock.OK() {
		t.Fatalf("the same history as a lock's passed: %v", lock)
	}
}

// dropLimits returns ops as a lock's operations.
func dropLimits(ops []Op) []Op {
	ops = slices.Clone(ops)
	for i := range ops {
		ops[i].Limit = 0
	}
	return ops
}

// n+1 holds certainly overlapping are flagged by porcupine and by the direct check, which names
// all of them; an acquire that returns after a holder's release was called (the release may
// have taken effect first) is no violation.
func TestSemaphoreOverlapFlagged(t *testing.T) {
	const n = 2
	ops := []Op{
		pacq(n, 0, 0, 10, 1), prel(n, 0, 100, 110),
		pacq(n, 1, 5, 20, 2), prel(n, 1, 90, 95),
		pacq(n, 2, 6, 30, 3), prel(n, 2, 120, 130), // p0 and p1 held from 20 to 90
	}
	res := Check(ops, Options{Fenced: true})
	if res.Linearizable != porcupine.Illegal || res.MaxHeld != n+1 {
		t.Fatalf("three holds of a semaphore of 2: porcupine %s, up to %d at once: %v", res.Linearizable, res.MaxHeld, res)
	}
	want := "p2 acquired a permit at 0.030ms (token 3) while 2 of 2 permits were held: " +
		"p0 from 0.010ms (token 1) until at least 0.100ms; p1 from 0.020ms (token 2) until at least 0.090ms"
	if len(res.Violations) != 2 || !contains(res.Violations, want) || !contains(res.Violations, "not linearizable as one semaphore of 2") {
		t.Fatalf("violations %q, want the overlap (%q) and porcupine's verdict", res.Violations, want)
	}

	ops[4].Return = 92_000 // p2's acquire returns after p1's release was called at 90µs
	if res := Check(ops, Options{Fenced: true}); !res.OK() || res.MaxHeld != n {
		t.Fatalf("an acquire granted during a release was flagged: %v\n%s", res, strings.Join(res.Violations, "\n"))
	}
	if res := Check(dropLimits(ops), Options{}); res.OK() {
		t.Fatal("as a lock's, the same history passed")
	}
}

// With fencing, a permit's token must exceed the token of every permit whose acquire returned
// before its own was called, released or not, and be unlike every other's, also when their
// acquires overlap; a permit needs a token. Porcupine, which does not model tokens, accepts
// them all.
func TestSemaphoreTokensFlagged(t *testing.T) {
	const n = 3
	ops := []Op{
		pacq(n, 0, 0, 10, 5), prel(n, 0, 20, 25),
		pacq(n, 1, 30, 40, 4), prel(n, 1, 60, 61), // 4, called after the permit of 5 was acquired
		pacq(n, 2, 31, 45, 6), prel(n, 2, 62, 63), // right
		pacq(n, 3, 35, 50, 6), prel(n, 3, 64, 65), // 6 as p2's, whose acquire overlaps
		pacq(n, 0, 70, 80, 0), prel(n, 0, 81, 82), // none
		pacq(n, 1, 90, 95, 7), prel(n, 1, 96, 97), // right: 0 is no token
	}
	res := Check(ops, Options{Fenced: true})
	if res.Linearizable != porcupine.Ok {
		t.Fatalf("porcupine: %s, want Ok (at most 3 held at once)", res.Linearizable)
	}
	for _, want := range []string{
		"p1: token 4 of the permit acquired at 0.040ms (called at 0.030ms) does not exceed token 5 of p0's permit, acquired before that call, at 0.010ms",
		"p3: token 6 of the permit acquired at 0.050ms is also that of p2's permit acquired at 0.045ms, at the same time",
		"p0: permit acquired at 0.080ms has no fencing token",
	} {
		if !contains(res.Violations, want) {
			t.Errorf("violations %q lack %q", res.Violations, want)
		}
	}
	if len(res.Violations) != 3 {
		t.Fatalf("violations %q, want 3", res.Violations)
	}
	if res := Check(ops, Options{}); !res.OK() {
		t.Fatalf("without Fenced, tokens were checked: %q", res.Violations)
	}

	// A permit that reuses the latest token of a permit acquired before it is flagged once.
	again := []Op{pacq(n, 0, 0, 10, 8), pacq(n, 1, 20, 30, 8), prel(n, 1, 40, 50), prel(n, 0, 60, 70)}
	if res := Check(again, Options{Fenced: true}); len(res.Violations) != 1 || !contains(res.Violations, "p1: token 8 of the permit acquired at 0.030ms (called at 0.020ms) does not exceed token 8 of p0's") {
		t.Fatalf("violations %q, want the reused token once", res.Violations)
	}
}

// A release by a process that holds no permit is flagged, by porcupine and by the pairing of
// each process's operations; so are operations of another kind in a semaphore's history.
func TestSemaphoreMalformedFlagged(t *testing.T) {
	const n = 2
	for name, c := range map[string]struct {
		ops     []Op
		verdict porcupine.CheckResult
		want    string
	}{
		"release by a non-holder": {[]Op{pacq(n, 0, 0, 10, 1), prel(n, 1, 20, 30), prel(n, 0, 40, 50)}, porcupine.Illegal, "p1: release at 0.020ms without a hold"},
		"a lock's acquire":        {[]Op{pacq(n, 0, 0, 10, 1), prel(n, 0, 20, 30), acq(1, 40, 50, 2)}, porcupine.Illegal, "p1: acquire at 0.040ms (limit 0, shared false) in the history of a semaphore of 2"},
		"a shared release":        {[]Op{pacq(n, 0, 0, 10, 1), rrel(0, 20, 30)}, porcupine.Illegal, "p0: shared release at 0.020ms of its permit acquire from 0.010ms"},
		"a re-entry":              {[]Op{{Process: 0, Kind: Acquire, Call: 0, Return: 1, Token: 1, Holds: 2, Limit: n}}, porcupine.Illegal, "reported 2 holds"},
		// Once the key is free, a semaphore of another n may take it (the model allows it), but
		// the history is then of two semaphores.
		"another limit": {[]Op{pacq(n, 0, 0, 10, 1), prel(n, 0, 20, 30), pacq(3, 1, 40, 50, 2)}, porcupine.Ok, "p1: permit acquire at 0.040ms (limit 3, shared false) in the history of a semaphore of 2"},
	} {
		t.Run(name, func(t *testing.T) {
			res := Check(c.ops, Options{Fenced: true, Timeout: 10 * time.Second})
			if res.Linearizable != c.verdict || !contains(res.Violations, c.want) {
				t.Fatalf("porcupine %s, want %s; violations %q, want one containing %q", res.Linearizable, c.verdict, res.Violations, c.want)
			}
		})
	}
}

// The semaphore model's states: holders come and go in any order (the state depends on the set
// only), a new holder needs a permit free and must not hold one, a release must come from a
// holder, and neither model takes the other's operations.
func TestSemaphoreModel(t *testing.T) {
	const n = 2
	step := func(s any, p int, kind Kind) (bool, any) {
		return SemaphoreModel.Step(s, lockInput{kind: kind, limit: n, process: p}, lockOutput{holds: 1})
	}
	must := func(ok bool, s any) any {
		t.Helper()
		if !ok {
			t.Fatalf("illegal step to %s", SemaphoreModel.DescribeState(s))
		}
		return s
	}
	init := SemaphoreModel.Init()
	a := must(step(must(step(init, 1, Acquire)), 9, Acquire))
	b := must(step(must(step(init, 9, Acquire)), 1, Acquire))
	if !SemaphoreModel.Equal(a, b) || SemaphoreModel.Hash(a) != SemaphoreModel.Hash(b) || SemaphoreModel.DescribeState(a) != "permits held by p1, p9" {
		t.Fatalf("the same holders in another order: %q and %q", SemaphoreModel.DescribeState(a), SemaphoreModel.DescribeState(b))
	}
	for _, c := range []struct {
		p    int
		kind Kind
	}{{2, Acquire}, {2, Release}} {
		if ok, _ := step(a, c.p, c.kind); ok {
			t.Fatalf("p%d %s on a semaphore of 2 held by p1 and p9 was legal", c.p, c.kind)
		}
	}
	one := must(step(a, 9, Release))
	if ok, _ := step(one, 1, Acquire); ok {
		t.Fatal("p1 acquired a second permit")
	}
	if ok, _ := SemaphoreModel.Step(one, lockInput{kind: Acquire, limit: n, process: 2}, lockOutput{holds: 2}); ok {
		t.Fatal("an acquire reporting 2 holds was legal")
	}
	one = must(step(one, 2, Acquire))
	if ok, _ := SemaphoreModel.Step(one, lockInput{kind: Acquire, limit: 3, process: 3}, lockOutput{holds: 1}); !ok {
		t.Fatal("an acquire of a permit of 3 with 2 held was illegal")
	}
	free := must(step(must(step(one, 1, Release)), 2, Release))
	if !SemaphoreModel.Equal(free, init) || SemaphoreModel.DescribeState(free) != "free" {
		t.Fatalf("after the holders left: %q, want free", SemaphoreModel.DescribeState(free))
	}
	for _, in := range []lockInput{{kind: Acquire, process: 0}, {kind: Acquire, shared: true, process: 0}} {
		if ok, _ := SemaphoreModel.Step(init, in, lockOutput{holds: 1}); ok {
			t.Fatalf("the semaphore model took a lock's %+v", in)
		}
	}
	if ok, _ := LockModel.Step(LockModel.Init(), lockInput{kind: Acquire, limit: n, process: 0}, lockOutput{holds: 1}); ok {
		t.Fatal("the lock model took a permit's acquire")
	}
}

// Permits recorded, written with WriteFile and read back keep their limit, lines written before
// Op had a limit read as a lock's, and Visualize draws a semaphore's history with its model.
func TestRecordPermits(t *testing.T) {
	var recs []*Recorder
	for p := range 3 { // three holders of a semaphore of 2 at once
		r := NewRecorder(p)
		r.AcquiredPermit(Now(), 2, uint64(p+1), 1)
		recs = append(recs, r)
	}
	var ops []Op
	for _, r := range recs {
		r.ReleasedPermit(Now(), 2)
		ops = append(ops, r.Ops()...)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "permits.jsonl")
	if err := WriteFile(path, ops); err != nil {
		t.Fatal(err)
	}
	read, err := ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(read, ops) || len(read) != 6 || read[0].Limit != 2 || read[1].Limit != 2 || read[1].Kind != Release {
		t.Fatalf("read back %+v, want %+v", read, ops)
	}
	res := Check(read, Options{Fenced: true})
	if res.Linearizable != porcupine.Illegal || !contains(res.Violations, "p2 acquired a permit at") || !contains(res.Violations, "while 2 of 2 permits were held: p0 from") {
		t.Fatalf("porcupine %s; violations %q, want three holders at once", res.Linearizable, res.Violations)
	}
	html, err := res.Visualize(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "p2 acquire permit of 2") || !strings.Contains(string(b), "permits held by p0, p1") {
		t.Fatalf("%s lacks the permits or the semaphore's states (%d bytes)", html, len(b))
	}

	old, err := Read(strings.NewReader(`{"p":1,"k":"acquire","call":5,"ret":9,"token":3,"holds":1}` + "\n"))
	if err != nil || len(old) != 1 || old[0] != (Op{Process: 1, Kind: Acquire, Call: 5, Return: 9, Token: 3, Holds: 1}) {
		t.Fatalf("a line without a limit read as %+v, %v", old, err)
	}
}
