package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/postgres"
	"github.com/hashlock/locker/internal/testkit/bench"
)

var benchCommand = command{
	name:    "bench",
	summary: "compare the Go Redis drivers: Lock+Unlock cost, contention, re-entry, the watchdog",
	help: `Measures the scenarios of the bench package (see bench/README.md) for each driver, side by
side on one server: the round-trip floor (two EVALSHA of "return 1" through the driver's own
script object) and the floor of our two scripts without the Client; uncontended Lock+Unlock;
Lock+Unlock from GOMAXPROCS and from 64 goroutines on distinct keys; --goroutines goroutines
taking turns on one key, holding it --hold, with one shared Client and with a Client each;
re-entry to depth 3; and --leases leases held with a --lease-ttl TTL (round trips and CPU per
watchdog tick). Each is run like a Go benchmark, for about --time per scenario and driver.

A progress line is shown on stderr when it is a terminal; a table follows at the end, with
each latency-bound result as a ratio to its driver's floor (floor/op: the time of the floor's
operation over the result's, measured side by side). --json FILE also writes the results as
JSON ("-" for stdout).

Without --redis, the drivers talk to an embedded miniredis, an in-process imitation of Redis:
that checks that everything runs, but its timings are not Redis timings. Pass --redis to
measure a real server; bench writes and deletes keys under "bench:" there. LOCKER_REDIS is
ignored, as by demo.

For the libraries people pick instead (bsm/redislock, redsync, rueidislock), see the Go
benchmarks of bench/compare.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *streams, []string) error {
		cf := addConnFlags(fs, true)
		// bench compares drivers: --driver takes a list, all of them by default.
		cf.driver = "all"
		if f := fs.Lookup("driver"); f != nil {
			f.DefValue = cf.driver
			f.Usage = "comma-separated `drivers`: memory (the Client on its in-process backend, no Redis), goredis, goredis-autopipeline, rueidis, redigo, valkey, postgres (with --postgres); or all (with --postgres and no --redis: memory and postgres)"
		}
		cfg := benchConfig{Time: time.Second, Scenarios: "all"}
		fs.StringVar(&cfg.Scenarios, "scenario", cfg.Scenarios, "comma-separated `scenarios`: "+strings.Join(scenarioNames(), ", ")+"; or all")
		fs.DurationVar(&cfg.Time, "time", cfg.Time, "measuring time per scenario and driver, like go test -benchtime")
		fs.IntVar(&cfg.Goroutines, "goroutines", bench.DefaultGoroutines, "goroutines of the contention scenarios")
		fs.DurationVar(&cfg.Hold, "hold", bench.DefaultHold, "how long a contending goroutine holds the lock (busy)")
		fs.IntVar(&cfg.Leases, "leases", bench.DefaultLeases, "leases held in the watchdog scenario (on the embedded miniredis: 100 unless given)")
		fs.IntVar(&cfg.Keys, "keys", bench.DefaultKeys, "keys of the many-hot-keys scenario, 4 goroutines on each (on the embedded miniredis: 100 unless given)")
		fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", bench.DefaultLeaseTTL, "TTL of the watchdog scenario's leases (renewed every third of it)")
		fs.StringVar(&cfg.JSON, "json", "", "also write the results as JSON to `FILE` (- for stdout, and the tables to stderr)")
		fs.BoolVar(&cfg.Markdown, "markdown", false, "print the tables in Markdown")
		fs.BoolVar(&cfg.Metrics, "metrics", false, "at exit, print on stderr a summary of the metrics of our Clients over the whole run (every scenario and driver, calibration runs included): lock calls by outcome, wait, time held, renewals, lost leases")
		return func(ctx context.Context, s *streams, _ []string) error {
			if len(cf.urls) > 1 {
				return usagef("bench takes one --redis (the quorum's cost is in go test -bench ./bench/)")
			}
			if len(cf.urls) == 1 {
				pw, err := cf.readPassword()
				if err != nil {
					return err
				}
				cfg.URL, cfg.Password, cfg.TLS = cf.urls[0], pw, cf.tls
			}
			cfg.Drivers, cfg.Postgres, cfg.PgTable = cf.driver, cf.postgres, cf.pgTable
			fs.Visit(func(f *flag.Flag) {
				cfg.LeasesSet = cfg.LeasesSet || f.Name == "leases"
				cfg.KeysSet = cfg.KeysSet || f.Name == "keys"
			})
			return runBench(ctx, s, cfg)
		}
	},
}

// benchConfig is the flags of bench.
type benchConfig struct {
	URL       string     // --redis; "" for the embedded miniredis
	Password  string     // for a URL without one: --redis-password-file or $LOCKER_REDIS_PASSWORD
	TLS       tlsOptions // --redis-ca, --redis-cert, --redis-key, --redis-insecure-skip-verify
	Drivers   string     // --driver: comma-separated, or "all"
	Postgres  string     // --postgres: the backend/postgres lib runs on it; "" for none
	PgTable   string     // --postgres-table
	Scenarios string     // --scenario: comma-separated, or "all"
	Time      time.Duration
	JSON      string
	Markdown  bool
	Metrics   bool // --metrics: a summary of the Clients' metrics on stderr at exit

	Goroutines int
	Hold       time.Duration
	Leases     int
	LeasesSet  bool // --leases was given
	LeaseTTL   time.Duration
	Keys       int
	KeysSet    bool // --keys was given
}

// embeddedLeases is the default of --leases on the embedded miniredis: it runs Lua slowly, and
// renewing even 1,000 leases every 100ms takes more than the whole of that time.
const embeddedLeases = 100

// embeddedKeys is the default of --keys on the embedded miniredis, for the same reason.
const embeddedKeys = 100

// benchDrivers are the values of bench's --driver, in the order of the tables.
var benchDrivers = []string{"memory", "goredis", "goredis-autopipeline", "rueidis", "redigo", "valkey", "postgres"}

func scenarioNames() []string {
	var names []string
	for _, s := range bench.Scenarios() {
		names = append(names, s.Name)
	}
	return names
}

// pick parses a comma-separated list of names out of all ("all" is every one), in all's order.
func pick(flagName, list string, all []string) ([]string, error) {
	if strings.TrimSpace(list) == "all" {
		return all, nil
	}
	var picked []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(all, name) {
			return nil, usagef("--%s %q: must be a comma-separated list of %s, or all", flagName, name, strings.Join(all, ", "))
		}
		picked = append(picked, name)
	}
	var out []string
	for _, name := range all {
		if slices.Contains(picked, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func (c benchConfig) validate() error {
	switch {
	case c.Time <= 0:
		return usagef("--time %v: must be positive", c.Time)
	case c.Goroutines < 1:
		return usagef("--goroutines %d: must be at least 1", c.Goroutines)
	case c.Hold < 0:
		return usagef("--hold %v: must not be negative", c.Hold)
	case c.Leases < 1:
		return usagef("--leases %d: must be at least 1", c.Leases)
	case c.Keys < 1:
		return usagef("--keys %d: must be at least 1", c.Keys)
	case c.LeaseTTL < 3*locker.MinTTL:
		return usagef("--lease-ttl %v: must be at least %v", c.LeaseTTL, 3*locker.MinTTL)
	}
	return nil
}

// benchReport is what --json writes.
type benchReport struct {
	Server       string         `json:"server"`   // the redacted URL, or "embedded miniredis"
	Embedded     bool           `json:"embedded"` // miniredis: its timings are not Redis timings
	RedisVersion string         `json:"redis_version,omitempty"`
	Date         string         `json:"date"`
	Go           string         `json:"go"`
	OS           string         `json:"os"`
	Arch         string         `json:"arch"`
	GOMAXPROCS   int            `json:"gomaxprocs"`
	Time         string         `json:"time_per_scenario"`
	Config       bench.Config   `json:"config"`
	Results      []bench.Result `json:"results"`
	Errors       []string       `json:"errors,omitempty"`
}

// runBench runs the scenarios and prints the tables to s.out.
func runBench(ctx context.Context, s *streams, cfg benchConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	drivers, err := pick("driver", cfg.Drivers, benchDrivers)
	if err != nil {
		return err
	}
	switch all := strings.TrimSpace(cfg.Drivers) == "all"; {
	case cfg.Postgres == "" && all:
		drivers = slices.DeleteFunc(drivers, func(d string) bool { return d == "postgres" })
	case cfg.Postgres == "" && slices.Contains(drivers, "postgres"):
		return usagef("--driver postgres: give --postgres URL")
	case cfg.Postgres != "" && all && cfg.URL == "": // PostgreSQL against miniredis would compare nothing
		drivers = []string{"memory", "postgres"}
	}
	redisRuns := slices.ContainsFunc(drivers, func(d string) bool { return d != "memory" && d != "postgres" })
	scenarios, err := pick("scenario", cfg.Scenarios, scenarioNames())
	if err != nil {
		return err
	}
	report := benchReport{
		Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		GOMAXPROCS: runtime.GOMAXPROCS(0), Time: cfg.Time.String(),
		Config: bench.Config{Goroutines: cfg.Goroutines, Hold: cfg.Hold, Leases: cfg.Leases, LeaseTTL: cfg.LeaseTTL, Keys: cfg.Keys},
	}

	// The server: --redis, or an embedded miniredis.
	raw := cfg.URL
	var redisOpts bench.RedisOptions
	if raw == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true) // leases expire by the wall clock, as on Redis
		if err := m.Start(); err != nil {
			return fmt.Errorf("start the embedded miniredis: %w", err)
		}
		defer m.Close()
		raw = "redis://" + m.Addr()
		report.Server, report.Embedded = "embedded miniredis", true
		redisOpts.DisableClientCache = true
		if !cfg.LeasesSet {
			report.Config.Leases = embeddedLeases
		}
		if !cfg.KeysSet {
			report.Config.Keys = embeddedKeys
		}
	} else {
		r, tlsCfg, err := (&connFlags{password: cfg.Password, tls: cfg.TLS}).parse(raw)
		if err != nil {
			return err
		}
		report.Server = r.String()
		if tlsCfg != nil && tlsCfg.InsecureSkipVerify {
			fmt.Fprintf(s.err, "locker bench: warning: %s\n", insecureWarning(r))
		}
		if report.RedisVersion, err = serverVersion(ctx, r, tlsCfg); err != nil {
			return &exitError{exitUnavailable, fmt.Errorf("%s: %w", report.Server, err)}
		}
		raw, redisOpts.TLSConfig = r.canonical(), tlsCfg
	}
	var libs []bench.Lib
	redisLibs, err := bench.Redis(raw, redisOpts)
	if err != nil {
		return urlError(raw, err)
	}
	for _, name := range drivers {
		switch name {
		case "memory":
			libs = append(libs, bench.Memory())
			continue
		case "postgres":
			schema, name := postgresTable(cfg.PgTable)
			pg, err := bench.Postgres(ctx, cfg.Postgres, postgres.WithTable(schema, name)) // creates the tables
			if err != nil {
				return &exitError{exitUnavailable, fmt.Errorf("%s: %w", redactPostgres(cfg.Postgres), err)}
			}
			libs = append(libs, pg)
			continue
		}
		for _, l := range redisLibs {
			if l.Name == name {
				libs = append(libs, l)
			}
		}
	}

	if !redisRuns && cfg.Postgres != "" {
		report.Server, report.Embedded = redactPostgres(cfg.Postgres), false
	}
	if cfg.Metrics {
		var m metrics
		for i := range libs {
			libs[i] = bench.WithClientOptions(libs[i], locker.WithObserver(m.observer()))
		}
		defer m.write(s.err, "bench")
	}

	w := &errWriter{w: s.out}
	if cfg.JSON == "-" { // stdout is for the JSON: the tables go to stderr
		w.w = s.err
	}
	switch {
	case !redisRuns:
	case report.Embedded:
		w.printf("server: embedded miniredis, an in-process imitation of Redis: its timings are NOT Redis timings (pass --redis URL to measure a real server)\n")
	default:
		w.printf("server: Redis %s at %s\n", report.RedisVersion, report.Server)
	}
	if cfg.Postgres != "" {
		w.printf("postgres: PostgreSQL at %s\n", redactPostgres(cfg.Postgres))
	}
	w.printf("%s %s/%s, GOMAXPROCS %d; about %v per scenario and driver; contention: %d goroutines, hold %v; many hot keys: %d keys × %d; watchdog: %d leases, TTL %v\n\n",
		report.Go, report.OS, report.Arch, report.GOMAXPROCS, cfg.Time, cfg.Goroutines, cfg.Hold, report.Config.Keys, bench.HotKeyClients, report.Config.Leases, cfg.LeaseTTL)

	prog := newProgress(s.err, len(scenarios)*len(libs))
	for _, name := range scenarios {
		sc, _ := bench.ScenarioNamed(name)
		for _, lib := range libs {
			if ctx.Err() != nil {
				break
			}
			prog.step(sc.Name, lib.Name)
			// A bound for a stuck run: calibration runs add up to a few times --time.
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute+20*cfg.Time)
			res, err := bench.Measure(sctx, cfg.Time, func(r bench.Runner) (bench.Result, error) {
				return sc.Run(sctx, r, lib, report.Config)
			})
			cancel()
			switch {
			case errors.Is(err, bench.ErrNotApplicable):
			case err != nil && ctx.Err() != nil: // interrupted: the results so far are printed
			case err != nil:
				msg := fmt.Sprintf("%s %s: %v", sc.Name, lib.Name, err)
				report.Errors = append(report.Errors, msg)
				prog.printf("locker bench: %s\n", msg)
			default:
				report.Results = append(report.Results, res)
			}
		}
	}
	prog.done()

	if err := bench.WriteTable(w, report.Results, cfg.Markdown); err != nil {
		return err
	}
	w.printf("floor/op, scripts/op: time of the floor's operation over the result's, measured side by side (1.00: as fast as the floor);\nroundtrips/op: backend calls per op.\n")
	if report.Embedded && redisRuns {
		w.printf("These are miniredis timings, not Redis timings; and since miniredis runs in this process, B/op and allocs/op include its own.\n")
	}
	if w.err != nil {
		return fmt.Errorf("writing the results: %w", w.err)
	}
	if cfg.JSON != "" {
		if err := writeJSON(s.out, cfg.JSON, report); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if len(report.Errors) > 0 {
		return fmt.Errorf("%d of the runs failed", len(report.Errors))
	}
	return nil
}

// serverVersion PINGs the server r (over TLS with cfg unless it is nil; checkTLS first) and
// returns its redis_version.
func serverVersion(ctx context.Context, r *redisURL, cfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if cfg != nil {
		if err := checkTLS(ctx, r.addr(), cfg); err != nil {
			return "", err
		}
	}
	rdb := redis.NewClient(goredisOptions(r, cfg))
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return "", err
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "unknown version", nil
}

// writeJSON writes report as indented JSON to the file name, or to out for "-".
func writeJSON(out io.Writer, name string, report benchReport) error {
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if name == "-" {
		_, err = out.Write(data)
	} else {
		err = os.WriteFile(name, data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// errWriter prints to w and keeps the first error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

// progress shows one self-overwriting line on w when w is a terminal, and nothing otherwise
// (messages from printf are shown either way).
type progress struct {
	w     io.Writer
	live  bool
	total int
	n     int
	start time.Time
}

func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, live: ok && isTerminal(f), total: total, start: time.Now()}
}

func (p *progress) step(scenario, lib string) {
	p.n++
	if p.live {
		fmt.Fprintf(p.w, "\r\033[K[%*d/%d %5.0fs] %-20s %s…", len(fmt.Sprint(p.total)), p.n, p.total,
			time.Since(p.start).Seconds(), scenario, lib)
	}
}

// printf prints a message on a line of its own.
func (p *progress) printf(format string, args ...any) {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format, args...)
}

func (p *progress) done() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
