package history

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Options tune Check.
type Options struct {
	// Fenced requires every acquire to report a fencing token above 0, and the tokens to
	// strictly increase in the order of the critical sections. Default false: tokens are not
	// checked.
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

	// Linearizable is porcupine's verdict: porcupine.Ok, porcupine.Illegal (a violation), or
	// porcupine.Unknown (Options.Timeout ran out: also reported as a violation).
	Linearizable porcupine.CheckResult
	CheckTime    time.Duration // porcupine's time

	// Violations describes everything wrong with the history, one line each (at most 10 of
	// each kind, then a count of the others); empty when it is correct.
	Violations []string

	history []porcupine.Operation  // for Visualize
	timeout time.Duration          // Options.Timeout
	notes   []porcupine.Annotation // the violations, as annotations for the visualization
}

// OK reports whether the history has no violation.
func (r *Result) OK() bool { return len(r.Violations) == 0 }

// String summarises the result in one line.
func (r *Result) String() string {
	return fmt.Sprintf("%d ops of %d processes, %d critical sections, %d handoffs; porcupine: %s in %v; %d violations",
		r.Ops, r.Processes, r.Sections, r.Handoffs, r.Linearizable, r.CheckTime.Round(time.Millisecond), len(r.Violations))
}

// Visualize writes porcupine's HTML view of the history (its linearization, or the partial
// ones and where they fail) to history.html in dir, with the violations as annotations under
// the tag "violations", and returns the file's path. It checks the history again with
// porcupine's verbose checker, which is slower (Options.Timeout bounds it too). Use a directory
// that outlives the test (os.MkdirTemp, or VisualizeTemp; not t.TempDir) so the file can be
// opened afterwards.
func (r *Result) Visualize(dir string) (string, error) {
	path := filepath.Join(dir, "history.html")
	_, info := porcupine.CheckOperationsVerbose(LockModel, r.history, r.timeout)
	info.AddAnnotations(r.notes)
	if err := porcupine.VisualizePath(LockModel, info, path); err != nil {
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

// Check checks that ops (the merged histories of every process) are the history of one lock:
// linearizable with respect to LockModel (by porcupine), without two critical sections that
// certainly overlap, each process alternating acquire and release, and with opts.Fenced, tokens
// strictly increasing with the order of the sections.
//
// Sections are ordered by the return of their acquires: when exclusion holds, a section's
// acquire returns before its release is called, which comes before the next holder's acquire
// takes effect, so that order is the order in which the lock granted them.
func Check(ops []Op, opts Options) *Result {
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	c := &checker{res: &Result{Ops: len(ops), history: Operations(ops), timeout: opts.Timeout}, origin: origin(ops)}
	sections := c.sections(ops)
	slices.SortStableFunc(sections, func(a, b section) int { return cmp.Compare(a.acq.Return, b.acq.Return) })
	c.res.Sections = len(sections)
	c.overlaps(sections)
	if opts.Fenced {
		c.tokens(sections)
	}
	for i := 1; i < len(sections); i++ {
		if sections[i].acq.Process != sections[i-1].acq.Process {
			c.res.Handoffs++
		}
	}

	start := time.Now()
	c.res.Linearizable = porcupine.CheckOperationsTimeout(LockModel, c.res.history, opts.Timeout)
	c.res.CheckTime = time.Since(start)
	switch c.res.Linearizable {
	case porcupine.Illegal:
		c.res.Violations = append(c.res.Violations, "porcupine: the history is not linearizable as one lock")
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
// process whose operations overlap, do not alternate, or report more than one hold.
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

// overlaps reports sections (sorted by acquire return) that were certainly held at once: a
// section is held at least from its acquire's return to its release's call.
func (c *checker) overlaps(sections []section) {
	var longest *section // of the sections before, the one certainly held the longest
	for i := range sections {
		s := &sections[i]
		if longest != nil && s.acq.Return < longest.heldUntil() {
			c.violation("overlap", s.acq.Return, min(longest.heldUntil(), s.heldUntil()),
				"p%d acquired at %s (token %d) while p%d held the lock from %s (token %d) until at least %s",
				s.acq.Process, c.at(s.acq.Return), s.acq.Token,
				longest.acq.Process, c.at(longest.acq.Return), longest.acq.Token, c.at(longest.heldUntil()))
		}
		if longest == nil || s.heldUntil() > longest.heldUntil() {
			longest = s
		}
	}
}

// tokens reports acquires without a token and tokens that do not increase with the order of
// the sections.
func (c *checker) tokens(sections []section) {
	for i, s := range sections {
		if s.acq.Token == 0 {
			c.violation("token", s.acq.Call, s.acq.Return, "p%d: acquire at %s has no fencing token", s.acq.Process, c.at(s.acq.Return))
			continue
		}
		if i == 0 {
			continue
		}
		if prev := sections[i-1].acq; s.acq.Token <= prev.Token {
			c.violation("token", prev.Return, s.acq.Return,
				"p%d: token %d acquired at %s does not exceed token %d of the section before it (p%d, acquired at %s)",
				s.acq.Process, s.acq.Token, c.at(s.acq.Return), prev.Token, prev.Process, c.at(prev.Return))
		}
	}
}
