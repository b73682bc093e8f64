package history

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Options tune Check.
type Options struct {
	// Fenced requires every exclusive acquire to report a fencing token above 0, and those
	// tokens to strictly increase in the order of the exclusive critical sections; a shared
	// acquire must report the token of the exclusive section before it (a shared hold reports
	// the latest token and never advances it), or, before any, a token below the first
	// exclusive one. In a semaphore's history, every permit must report a token above 0, larger
	// than the token of every permit whose acquire returned before its acquire was called, and
	// unlike that of every other permit. Default false: tokens are not checked.
	Fenced bool

	// Timeout bounds porcupine's search (and again Result.Visualize's). When it runs out, the
	// history was not checked, and that is reported as a violation. Default 1 minute.
	Timeout time.Duration
}

// maxReported is how many violations of one kind Check describes; it counts the others.
const maxReported = 10

// Result is what Check found.
type Result struct {
	Ops       int // operations checked
	Processes int // distinct processes
	Sections  int // critical sections: acquires, each with the release that follows it
	Handoffs  int // consecutive sections (in acquire order) of different processes

	SharedSections int // of Sections, the shared ones (Op.Shared)
	MaxShared      int // the most shared sections certainly held at one instant

	Limit   int // in a semaphore's history, its permits (Op.Limit); 0 in a lock's
	MaxHeld int // in a semaphore's history, the most permits certainly held at one instant

	// Linearizable is porcupine's verdict: porcupine.Ok, porcupine.Illegal (a violation), or
	// porcupine.Unknown (Options.Timeout ran out: also reported as a violation).
	Linearizable porcupine.CheckResult
	CheckTime    time.Duration // porcupine's time

	// Violations describes everything wrong with the history, one line each (at most 10 of
	// each kind, then a count of the others); empty when it is correct.
	Violations []string

	history []porcupine.Operation  // for Visualize
	model   porcupine.Model        // LockModel or SemaphoreModel, for Visualize
	timeout time.Duration          // Options.Timeout
	notes   []porcupine.Annotation // the violations, as annotations for the visualization
}

// kind names what the history is of: "lock", "semaphore of 3".
func (r *Result) kind() string {
	if r.Limit > 0 {
		return fmt.Sprintf("semaphore of %d", r.Limit)
	}
	return "lock"
}

// OK reports whether the history has no violation.
func (r *Result) OK() bool { return len(r.Violations) == 0 }

// String summarises the result in one line.
func (r *Result) String() string {
	shared := ""
	switch {
	case r.Limit > 0:
		shared = fmt.Sprintf(" (of a semaphore of %d, up to %d at once)", r.Limit, r.MaxHeld)
	case r.SharedSections > 0:
		shared = fmt.Sprintf(" (%d shared, up to %d at once)", r.SharedSections, r.MaxShared)
	}
	return fmt.Sprintf("%d ops of %d processes, %d critical sections%s, %d handoffs; porcupine: %s in %v; %d violations",
		r.Ops, r.Processes, r.Sections, shared, r.Handoffs, r.Linearizable, r.CheckTime.Round(time.Millisecond), len(r.Violations))
}

// Visualize writes porcupine's HTML view of the history (its linearization, or the partial
// ones and where they fail) to history.html in dir, with the violations as annotations under
// the tag "violations", and returns the file's path. It checks the history again with
// porcupine's verbose checker, which is slower (Options.Timeout bounds it too). Use a directory
// that outlives the test (os.MkdirTemp, or VisualizeTemp; not t.TempDir) so the file can be
// opened afterwards.
func (r *Result) Visualize(dir string) (string, error) {
	path := filepath.Join(dir, "history.html")
	_, info := porcupine.CheckOperationsVerbose(r.model, r.history, r.timeout)
	info.AddAnnotations(r.notes)
	if err := porcupine.VisualizePath(r.model, info, path); err != nil {
		return "", fmt.Errorf("history: visualize: %w", err)
	}
	return path, nil
}

// VisualizeTemp is Visualize into a new directory under os.TempDir.
func (r *Result) VisualizeTemp() (string, error) {
	dir, err := os.MkdirTemp("", "locker-history-")
	if err != nil {
		return "", fmt.Errorf("history: %w", err)
	}
	return r.Visualize(dir)
}

// section is one critical section: an acquire and the release that follows it in the same
// process (nil when the history ends while it is held).
type section struct {
	acq, rel *Op
}

// heldUntil is the latest time at which the section was certainly still held: the call of
// its release, or for ever.
func (s section) heldUntil() int64 {
	if s.rel == nil {
		return math.MaxInt64
	}
	return s.rel.Call
}

// Check checks that ops (the merged histories of every process) are the history of one
// readers/writer lock: linearizable with respect to LockModel (by porcupine), without an
// exclusive critical section that certainly overlaps another section (shared ones may overlap
// each other), each process alternating acquire and release of one kind, and with
// opts.Fenced, tokens as Options.Fenced describes. Sections are ordered by the return of their
// acquires: the order in which the lock granted exclusive sections and the readers between them.
// A history of a semaphore's operations (Op.Limit, the same in every one) is checked likewise
// against SemaphoreModel, with never more sections than its permits certainly held at one
// instant (named when it fails); its sections' order says nothing of the order of the grants.
// More in check.go's comments.
func Check(ops []Op, opts Options) *Result {
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	res := &Result{Ops: len(ops), Limit: limitOf(ops), history: Operations(ops), model: LockModel, timeout: opts.Timeout}
	if res.Limit > 0 {
		res.model = SemaphoreModel
	}
	c := &checker{res: res, origin: origin(ops)}
	sections := c.sections(ops)
	slices.SortStableFunc(sections, func(a, b section) int { return cmp.Compare(a.acq.Return, b.acq.Return) })
	c.res.Sections = len(sections)
	switch {
	case res.Limit > 0:
		c.permits(sections)
		if opts.Fenced {
			c.permitTokens(sections)
		}
	default:
		c.overlaps(sections)
		c.shared(sections)
		if opts.Fenced {
			c.tokens(sections)
		}
	}
	for i := 1; i < len(sections); i++ {
		if sections[i].acq.Process != sections[i-1].acq.Process {
			c.res.Handoffs++
		}
	}

	start := time.Now()
	c.res.Linearizable = porcupine.CheckOperationsTimeout(res.model, c.res.history, opts.Timeout)
	c.res.CheckTime = time.Since(start)
	switch c.res.Linearizable {
	case porcupine.Illegal:
		c.res.Violations = append(c.res.Violations, "porcupine: the history is not linearizable as one "+res.kind())
	case porcupine.Unknown:
		c.res.Violations = append(c.res.Violations, fmt.Sprintf("porcupine: no verdict within %v: the history was not checked", opts.Timeout))
	}
	for _, kind := range slices.Sorted(maps.Keys(c.counts)) {
		if n := c.counts[kind]; n > maxReported {
			c.res.Violations = append(c.res.Violations, fmt.Sprintf("… and %d more of kind %q", n-maxReported, kind))
		}
	}
	return c.res
}

// checker accumulates a Result.
type checker struct {
	res    *Result
	origin int64
	counts map[string]int // violations per kind
}

// violation records a violation of kind, for the visualization at [start, end] (readings of
// Now; an end of math.MaxInt64 is the end of the history).
func (c *checker) violation(kind string, start, end int64, format string, args ...any) {
	if end < start || end == math.MaxInt64 {
		end = start
	}
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[kind]++
	if c.counts[kind] > maxReported {
		return
	}
	msg := fmt.Sprintf(format, args...)
	c.res.Violations = append(c.res.Violations, msg)
	c.res.notes = append(c.res.notes, porcupine.Annotation{
		Tag: "violations", Start: start - c.origin, End: end - c.origin,
		Description: kind, Details: msg, BackgroundColor: "#f7b4b4",
	})
}

// at formats a reading of Now relative to the history's first call.
func (c *checker) at(t int64) string {
	if t == math.MaxInt64 {
		return "the end"
	}
	return ms(t - c.origin)
}

// sections pairs each process's acquires with the releases that follow them, reporting a
// process whose operations overlap, do not alternate, or report more than one hold, and in a
// semaphore's history, operations of another kind (a lock's, or another limit's).
func (c *checker) sections(ops []Op) []section {
	byProcess := map[int][]*Op{}
	for i := range ops {
		op := &ops[i]
		byProcess[op.Process] = append(byProcess[op.Process], op)
	}
	c.res.Processes = len(byProcess)
	var out []section
	for _, p := range slices.Sorted(maps.Keys(byProcess)) {
		seq := byProcess[p]
		slices.SortStableFunc(seq, func(a, b *Op) int { return cmp.Compare(a.Call, b.Call) })
		var open *Op // the acquire whose release comes next
		for i, op := range seq {
			switch {
			case op.Return < op.Call:
				c.violation("malformed", op.Return, op.Call, "p%d: %s returned at %s before it was called at %s", p, op.Kind, c.at(op.Return), c.at(op.Call))
			case i > 0 && op.Call < seq[i-1].Return:
				c.violation("malformed", op.Call, seq[i-1].Return, "p%d: %s called at %s while its %s (returned at %s) was running", p, op.Kind, c.at(op.Call), seq[i-1].Kind, c.at(seq[i-1].Return))
			}
			if op.Limit != c.res.Limit || (op.Limit > 0 && op.Shared) {
				c.violation("malformed", op.Call, op.Return, "p%d: %s at %s (limit %d, shared %v) in the history of a %s", p, describe(op), c.at(op.Call), op.Limit, op.Shared, c.res.kind())
			}
			switch op.Kind {
			case Acquire:
				if open != nil {
					c.violation("malformed", op.Call, op.Return, "p%d: acquire at %s while it held the lock from %s", p, c.at(op.Return), c.at(open.Return))
					out = append(out, section{acq: open})
				}
				if op.Holds != 1 {
					c.violation("holds", op.Call, op.Return, "p%d: acquire at %s reported %d holds, want 1 (a fresh lock)", p, c.at(op.Return), op.Holds)
				}
				open = op
			case Release:
				if open == nil {
					c.violation("malformed", op.Call, op.Return, "p%d: release at %s without a hold", p, c.at(op.Call))
					continue
				}
				if op.Shared != open.Shared || op.Limit != open.Limit {
					c.violation("malformed", op.Call, op.Return, "p%d: %s at %s of its %s from %s", p, describe(op), c.at(op.Call), describe(open), c.at(open.Return))
				}
				out = append(out, section{acq: open, rel: op})
				open = nil
			default:
				c.violation("malformed", op.Call, op.Return, "p%d: unknown operation %q at %s", p, op.Kind, c.at(op.Call))
			}
		}
		if open != nil {
			out = append(out, section{acq: open})
		}
	}
	return out
}

// overlaps reports sections (sorted by acquire return) that were certainly held at once while
// one of them was exclusive: a section is held at least from its acquire's return to its
// release's call.
func (c *checker) overlaps(sections []section) {
	var longest, writer *section // of the sections before (the exclusive ones), the one certainly held the longest
	for i := range sections {
		s := &sections[i]
		other := longest // an exclusive section conflicts with any
		if s.acq.Shared {
			other = writer // a shared one with exclusive ones only
		}
		if other != nil && s.acq.Return < other.heldUntil() {
			c.violation("overlap", s.acq.Return, min(other.heldUntil(), s.heldUntil()),
				"p%d acquired%s at %s (token %d) while p%d held the lock%s from %s (token %d) until at least %s",
				s.acq.Process, sharedly(s.acq), c.at(s.acq.Return), s.acq.Token,
				other.acq.Process, sharedly(other.acq), c.at(other.acq.Return), other.acq.Token, c.at(other.heldUntil()))
		}
		if longest == nil || s.heldUntil() > longest.heldUntil() {
			longest = s
		}
		if !s.acq.Shared && (writer == nil || s.heldUntil() > writer.heldUntil()) {
			writer = s
		}
	}
}

// shared counts the shared sections and the most of them certainly held at one instant.
func (c *checker) shared(sections []section) {
	for _, s := range sections {
		if s.acq.Shared {
			c.res.SharedSections++
		}
	}
	c.res.MaxShared = held(sections, func(s *section) bool { return s.acq.Shared }, nil)
}

// permits reports, in a semaphore's history, each section that begins while all the
// semaphore's permits are certainly held by others (more sections than permits are then held at
// once), naming them all, and counts the most sections certainly held at one instant.
func (c *checker) permits(sections []section) {
	n := c.res.Limit
	c.res.MaxHeld = held(sections, func(*section) bool { return true }, func(s *section, others []*section) {
		if len(others) < n {
			return
		}
		until := s.heldUntil()
		var holders []string
		for _, o := range others {
			until = min(until, o.heldUntil())
			holders = append(holders, fmt.Sprintf("p%d from %s (token %d) until at least %s",
				o.acq.Process, c.at(o.acq.Return), o.acq.Token, c.at(o.heldUntil())))
		}
		c.violation("overlap", s.acq.Return, until, "p%d acquired a permit at %s (token %d) while %d of %d permits were held: %s",
			s.acq.Process, c.at(s.acq.Return), s.acq.Token, len(others), n, strings.Join(holders, "; "))
	})
}

// held sweeps through time the sections for which keep is true, each certainly held from its
// acquire's return to its heldUntil, calling begin (when not nil) as each begins, with the
// others held then (in the order they began; begin must not keep the slice), and returns the
// most held at one instant. A section held until t and one held from t were not both held.
func held(sections []section, keep func(*section) bool, begin func(s *section, others []*section)) int {
	type event struct {
		at    int64
		delta int // 1 at the beginning, -1 at the end
		s     *section
	}
	var events []event
	for i := range sections {
		s := &sections[i]
		if keep(s) && s.acq.Return < s.heldUntil() {
			events = append(events, event{s.acq.Return, 1, s}, event{s.heldUntil(), -1, s})
		}
	}
	// At equal times ends come first; beginnings keep the sections' order.
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	var active []*section
	most := 0
	for _, e := range events {
		if e.delta < 0 {
			active = slices.DeleteFunc(active, func(o *section) bool { return o == e.s })
			continue
		}
		if begin != nil {
			begin(e.s, active)
		}
		active = append(active, e.s)
		most = max(most, len(active))
	}
	return most
}

// describe names op and its kind for messages: "acquire", "shared release", "permit acquire"...
func describe(op *Op) string {
	switch {
	case op.Limit != 0:
		return "permit " + string(op.Kind)
	case op.Shared:
		return "shared " + string(op.Kind)
	}
	return string(op.Kind)
}

// sharedly is " shared" for a shared operation, for messages.
func sharedly(op *Op) string {
	if op.Shared {
		return " shared"
	}
	return ""
}

// tokens reports exclusive acquires without a token, exclusive tokens that do not increase with
// the order of the sections, and shared acquires whose token is not that of the exclusive
// section before them (before any: not below the first exclusive token).
func (c *checker) tokens(sections []section) {
	var prev *Op     // the acquire of the exclusive section before
	var shared []*Op // shared acquires before any exclusive one
	for _, s := range sections {
		switch {
		case s.acq.Shared && prev == nil:
			shared = append(shared, s.acq)
		case s.acq.Shared:
			if s.acq.Token != prev.Token {
				c.violation("token", prev.Return, s.acq.Return,
					"p%d: shared token %d acquired at %s is not token %d of the exclusive section before it (p%d, acquired at %s)",
					s.acq.Process, s.acq.Token, c.at(s.acq.Return), prev.Token, prev.Process, c.at(prev.Return))
			}
		case s.acq.Token == 0:
			c.violation("token", s.acq.Call, s.acq.Return, "p%d: acquire at %s has no fencing token", s.acq.Process, c.at(s.acq.Return))
		case prev == nil:
			for _, r := range shared {
				if r.Token >= s.acq.Token {
					c.violation("token", r.Return, s.acq.Return,
						"p%d: shared token %d acquired at %s is not below token %d of the first exclusive section after it (p%d, acquired at %s)",
						r.Process, r.Token, c.at(r.Return), s.acq.Token, s.acq.Process, c.at(s.acq.Return))
				}
			}
			prev = s.acq
		default:
			if s.acq.Token <= prev.Token {
				c.violation("token", prev.Return, s.acq.Return,
					"p%d: token %d acquired at %s does not exceed token %d of the section before it (p%d, acquired at %s)",
					s.acq.Process, s.acq.Token, c.at(s.acq.Return), prev.Token, prev.Process, c.at(prev.Return))
			}
			prev = s.acq
		}
	}
}

// permitTokens reports, in a semaphore's history, permits without a token, and permits whose
// token is not the largest yet: every new permit draws a token larger than every earlier one's,
// so a permit whose acquire was called after another's returned has the larger token. Of two
// permits whose acquires overlap in time either may have drawn first, so their tokens may come
// in either order, but they differ: each new permit draws its own.
func (c *checker) permitTokens(sections []section) {
	var byReturn []*Op // the acquires with a token, in the order of their returns (the sections')
	for _, s := range sections {
		if s.acq.Token == 0 {
			c.violation("token", s.acq.Call, s.acq.Return, "p%d: permit acquired at %s has no fencing token", s.acq.Process, c.at(s.acq.Return))
			continue
		}
		byReturn = append(byReturn, s.acq)
	}
	byCall := slices.Clone(byReturn)
	slices.SortStableFunc(byCall, func(a, b *Op) int { return cmp.Compare(a.Call, b.Call) })
	flagged := map[*Op]bool{}
	var top *Op // of the acquires that returned before the call at hand, the one with the largest token
	next := 0   // the next of byReturn to consider for top
	for _, op := range byCall {
		for ; next < len(byReturn) && byReturn[next].Return < op.Call; next++ {
			if top == nil || byReturn[next].Token > top.Token {
				top = byReturn[next]
			}
		}
		if top != nil && top != op && top.Token >= op.Token { // top is op only if op returned before its call
			flagged[op] = true
			c.violation("token", top.Return, op.Return,
				"p%d: token %d of the permit acquired at %s (called at %s) does not exceed token %d of p%d's permit, acquired before that call, at %s",
				op.Process, op.Token, c.at(op.Return), c.at(op.Call), top.Token, top.Process, c.at(top.Return))
		}
	}
	first := map[uint64]*Op{} // the first permit (by return) of each token
	for _, op := range byReturn {
		f, ok := first[op.Token]
		switch {
		case !ok:
			first[op.Token] = op
		case !flagged[op]: // else reported above
			c.violation("token", f.Call, op.Return,
				"p%d: token %d of the permit acquired at %s is also that of p%d's permit acquired at %s, at the same time: each new permit draws its own",
				op.Process, op.Token, c.at(op.Return), f.Process, c.at(f.Return))
		}
	}
}

// limitOf returns the Limit of the first of ops that has one: the semaphore whose history ops
// are, or 0 for a lock's.
func limitOf(ops []Op) int {
	for _, op := range ops {
		if op.Limit > 0 {
			return op.Limit
		}
	}
	return 0
}
