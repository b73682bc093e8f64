package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// sorted returns results ordered by scenario (in the order of Scenarios) and then as they came.
func sorted(results []Result) []Result {
	rank := make(map[string]int)
	for i, s := range Scenarios() {
		rank[s.Name] = i
	}
	out := slices.Clone(results)
	slices.SortStableFunc(out, func(a, b Result) int {
		ra, oka := rank[a.Scenario]
		rb, okb := rank[b.Scenario]
		if !oka {
			ra = len(rank)
		}
		if !okb {
			rb = len(rank)
		}
		return ra - rb
	})
	return out
}

// WriteTable writes results as four tables — latency and throughput, contention, many hot
// keys, watchdog — aligned with spaces, or in Markdown when markdown is set.
func WriteTable(w io.Writer, results []Result, markdown bool) error {
	results = sorted(results)
	var ops, cont, hot, wd []Result
	for _, r := range results {
		switch {
		case r.Leases > 0:
			wd = append(wd, r)
		case r.Keys > 0:
			hot = append(hot, r)
		case r.HandoffsPerSec > 0:
			cont = append(cont, r)
		default:
			ops = append(ops, r)
		}
	}
	t := &table{markdown: markdown}
	if len(ops) > 0 {
		t.header("scenario", "lib", "ns/op", "floor/op", "scripts/op", "B/op", "allocs/op", "roundtrips/op")
		for _, r := range ops {
			t.row(r.Scenario, r.Lib, fmt.Sprintf("%.0f", r.NsPerOp), ratio(r.FloorRatio), ratio(r.ScriptsRatio),
				fmt.Sprintf("%.0f", r.BytesPerOp), fmt.Sprintf("%.1f", r.AllocsPerOp), count(r.RoundTripsPerOp))
		}
		t.end()
	}
	if len(cont) > 0 {
		t.header("scenario", "lib", "goroutines", "handoffs/s", "busy", "wait p50", "wait p99", "wait max", "fairness", "writes or speedup", "B/op", "allocs/op", "roundtrips/op")
		for _, r := range cont {
			writes := "-"
			switch {
			case r.Writes > 0:
				writes = fmt.Sprint(r.Writes)
			case r.Speedup > 0:
				writes = fmt.Sprintf("%.1f×", r.Speedup)
			}
			t.row(r.Scenario, r.Lib, fmt.Sprint(r.Goroutines), fmt.Sprintf("%.0f", r.HandoffsPerSec), busy(r.Busy),
				Dur(r.WaitP50), Dur(r.WaitP99), Dur(r.WaitMax), fmt.Sprintf("%.2f", r.Fairness), writes,
				fmt.Sprintf("%.0f", r.BytesPerOp), fmt.Sprintf("%.1f", r.AllocsPerOp), count(r.RoundTripsPerOp))
		}
		t.end()
	}
	if len(hot) > 0 {
		t.header("scenario", "lib", "keys", "clients", "handoffs/s", "wait p50", "wait p99", "wait max", "fairness", "conns/client", "pub/sub conns/client", "B/op", "allocs/op", "roundtrips/op")
		for _, r := range hot {
			t.row(r.Scenario, r.Lib, fmt.Sprint(r.Keys), fmt.Sprint(r.Clients), fmt.Sprintf("%.0f", r.HandoffsPerSec),
				Dur(r.WaitP50), Dur(r.WaitP99), Dur(r.WaitMax), fmt.Sprintf("%.2f", r.Fairness), count(r.ConnsPerClient), count(r.PubSubConnsPerClient),
				fmt.Sprintf("%.0f", r.BytesPerOp), fmt.Sprintf("%.1f", r.AllocsPerOp), count(r.RoundTripsPerOp))
		}
		t.end()
	}
	if len(wd) > 0 {
		t.header("scenario", "lib", "leases", "roundtrips/tick", "CPU/tick", "leases/call", "lost", "B/lease", "B/period", "allocs/period")
		for _, r := range wd {
			cpu := "?"
			if r.CPUPerTick >= 0 {
				cpu = Dur(r.CPUPerTick)
			}
			t.row(r.Scenario, r.Lib, fmt.Sprint(r.Leases), fmt.Sprintf("%.2f", r.RenewCallsPerTick),
				cpu, fmt.Sprintf("%.0f", r.LeasesPerCall), fmt.Sprint(r.Lost), fmt.Sprintf("%.0f", r.BytesPerLease),
				fmt.Sprintf("%.0f", r.BytesPerOp), fmt.Sprintf("%.0f", r.AllocsPerOp))
		}
		t.end()
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}

func count(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}

// Dur formats d for a table: µs below a millisecond, ms below a second, else s.
func Dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// table builds one or more tables, plain (aligned) or Markdown.
type table struct {
	markdown bool
	b        strings.Builder
	tw       *tabwriter.Writer
}

func (t *table) header(cols ...string) {
	if t.markdown {
		t.line(cols)
		seps := make([]string, len(cols))
		for i := range seps {
			seps[i] = "---"
			if i >= 2 {
				seps[i] = "---:"
			}
		}
		t.line(seps)
		return
	}
	t.tw = tabwriter.NewWriter(&t.b, 0, 0, 2, ' ', tabwriter.AlignRight)
	t.row(cols...)
}

func (t *table) row(cols ...string) {
	if t.markdown {
		t.line(cols)
		return
	}
	// AlignRight right-aligns every cell; the first two (names) read better left-aligned, so
	// they are padded here.
	fmt.Fprintf(t.tw, "%-20s\t%-22s\t%s\t\n", cols[0], cols[1], strings.Join(cols[2:], "\t"))
}

func (t *table) line(cols []string) {
	t.b.WriteString("| " + strings.Join(cols, " | ") + " |\n")
}

func (t *table) end() {
	if t.tw != nil {
		t.tw.Flush()
		t.tw = nil
	}
	t.b.WriteString("\n")
}

// busy formats a Busy share ("-" when not measured).
func busy(b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", b)
}
