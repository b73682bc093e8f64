// Command locker is the command-line companion of the locker package
// (github.com/hashlock/locker): it shows reentrant, leased locks at work, runs commands under a
// lock, and lets an operator look at and remove locks.
//
// Usage:
//
//	locker <command> [flags] [arguments]
//
// The commands are:
//
//	demo     two workers contend for one lock: waiting, re-entry, watchdog renewals,
//	         takeover on release, and a check that mutual exclusion held
//	run      run a command while holding a lock, flock(1) across machines:
//	         locker run [-n | -w SECONDS] [-E CODE] [-s | --limit N] [--fair] KEY command [args...]
//	         locker run [flags] KEY -c 'shell command'
//	         (waits for ever by default; exclusive by default, -s (--shared) for a shared
//	         lock that other shared runs share, as flock -s; --limit N for one of the N
//	         permits of a semaphore, so that at most N runs on KEY run at once; --fair to get
//	         the lock in the order of asking; see docs/locker-run.md for the forms,
//	         kill-safety, nested runs and the exit codes next to flock's)
//	inspect  show whether a key is locked, exclusively or shared (by how many readers) or as
//	         a semaphore (how many of its permits), by whom, its hold counts, remaining
//	         leases and queued waiters:
//	         locker inspect [--json] KEY
//	unlock   remove a lock whoever holds it: locker unlock --force [--yes] KEY
//	bench    compare the Go Redis drivers on one server: Lock+Unlock cost, contention,
//	         re-entry, the watchdog (see bench/README.md)
//	help     the commands, or one command's help: locker help COMMAND
//	version  the version and build (also locker --version)
//
// Run "locker help <command>" or "locker <command> --help" for the flags of a command.
//
// Every command talks to Redis through the flags
//
//	--redis URL      redis://[[user:]password@]host[:port][/db][?client_name=NAME], or
//	                 rediss:// for TLS; repeated (3 or 5 times), a quorum of independent
//	                 servers, a minority of which may be down at the start. The URL means the
//	                 same to every driver (a name alone before @ is a password, as redis-cli
//	                 reads it); an unknown ?option is a usage error
//	--driver NAME    the Go Redis driver: goredis (the default), rueidis, redigo or valkey
//	--redis-password-file FILE
//	                 the password of each --redis URL that has none, from the first line of
//	                 FILE (default: the environment variable LOCKER_REDIS_PASSWORD); unlike a
//	                 password in --redis, ps does not show it
//	--redis-ca FILE, --redis-cert FILE, --redis-key FILE, --redis-insecure-skip-verify
//	                 rediss:// only: a CA to trust besides the system's (SSL_CERT_FILE
//	                 replaces those), a client certificate and its key, no verification of the
//	                 server (with a warning); per URL, ?ca_file=, cert_file=, key_file=,
//	                 skip_verify=true. A failed TLS handshake is reported at once, with the fix
//
// or, instead of Redis, PostgreSQL (backend/postgres):
//
//	--postgres URL   postgres://[user[:password]@]host[:port]/db[?sslmode=…], as pgx reads it
//	                 (the password also from PGPASSWORD or ~/.pgpass); the lock's tables and
//	                 functions are created at first use
//	--postgres-table SCHEMA.NAME
//	                 where they live (default public.locker)
//
// locker never prints what may be a password in a URL, nor its query values:
// redis://hunter2@host (a password, to Redigo and redis-cli) shows as redis://xxxxx@host,
// redis://user:pw@host as redis://user:xxxxx@host, ?password=pw as ?password=xxxxx.
//
// Without --redis, demo starts an embedded miniredis (an in-process imitation of Redis), so
// "go run ./cmd/locker demo" needs no set-up; run, inspect and unlock take the URL from the
// environment variable LOCKER_REDIS instead (inside the command of a locker run without -o, which does not
// get LOCKER_REDIS, the servers of the run's hold), and fail with exit code 2 when neither is
// given.
// (demo ignores LOCKER_REDIS, so that it never writes to a server nobody named on its command
// line.) inspect and unlock touch only locks: a key holding anything else is reported and left
// as it is.
//
// Exit codes, one table for every command (run adds the command's own status, 70, 126, 127
// and 128+N: "locker help run", and docs/locker-run.md beside flock's):
//
//	0      success, or help was asked for (inspect and unlock: whether the key was locked or not)
//	1      inspect, unlock: a key that is not a lock (left as it is), a declined confirmation,
//	       another error from the library; demo: a failed check; bench: a failed measurement;
//	       run: the lock was not obtained (-n, -w; a key held with another --limit; -E CODE
//	       changes it)
//	2      usage error: unknown command, bad flag or argument, an empty or too long key, no
//	       Redis URL, unlock without --force, or unlock without --yes when stdin is not a
//	       terminal
//	69     Redis could not be used: the server cannot be reached or refuses the connection
//	       (TLS, credentials), a call fails with the server gone, a quorum lacks its majority
//	       (sysexits' EX_UNAVAILABLE); run: also any other error before its command started,
//	       such as a key that is not a lock
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/redis/go-redis/v9/logging"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

func main() {
	logging.Disable() // go-redis would log its retries on stderr; its errors reach us anyway
	os.Exit(run(os.Args[1:], &streams{in: os.Stdin, out: os.Stdout, err: os.Stderr, terminal: isTerminal(os.Stdin)}))
}

// streams are a command's standard input and outputs.
type streams struct {
	in       io.Reader
	out, err io.Writer
	terminal bool // in is a terminal, so a command may ask a question there
}

// A command is one subcommand of locker.
type command struct {
	name    string
	summary string // one line, for the command list
	args    string // the positional arguments in the usage line; "" for none
	help    string // a paragraph, for the command's --help
	// setup defines the command's flags on fs and returns the function that runs the command
	// once they are parsed, with the positional arguments (none unless args is set). That
	// function returns a *usageError for a bad flag value or argument, an *exitError for a
	// specific exit code.
	setup func(fs *flag.FlagSet) func(ctx context.Context, s *streams, args []string) error
	// rawArgs: flags end at the first positional argument (run: what follows is a command line).
	// Otherwise flags and positional arguments may be mixed ("unlock --force KEY --yes").
	rawArgs bool
}

var commands = []command{demoCommand, runCommand, inspectCommand, unlockCommand, benchCommand}

// exitUnavailable is the exit code of every command when Redis cannot be used: the server
// cannot be reached, refuses the connection, or fails a call with an error wrapping
// locker.ErrUnavailable (sysexits' EX_UNAVAILABLE); locker run also uses it for any error before
// its command started.
const exitUnavailable = 69

// A usageError is a bad flag value or argument: exit code 2 instead of 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// An exitError ends the command with exit code code, after printing err if it is not nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// errorText is err's message without the library's leading "locker: ", so that a message printed
// after "locker CMD: " names the package once (the library names it once in a chain: see
// display.Errorf).
func errorText(err error) string {
	return strings.TrimPrefix(err.Error(), "locker: ")
}

// run is the whole command: it returns the exit code instead of exiting, for tests.
func run(args []string, s *streams) int {
	if len(args) == 0 {
		usage(s.err)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return help(args[1:], s)
	case "version", "-version", "--version":
		fmt.Fprintln(s.out, versionLine())
		return 0
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(s.err, "locker: unknown command %s\nRun 'locker help' for the commands.\n", display.Key(args[0]))
		return 2
	}

	fs := flag.NewFlagSet("locker "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports parse errors itself, in one line
	runCmd := cmd.setup(fs)
	pos, err := cmd.parse(fs, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		cmd.usage(s.out, fs)
		return 0
	case err != nil:
		return cmd.usageError(s, err.Error())
	case cmd.args == "" && len(pos) > 0:
		return cmd.usageError(s, "unexpected arguments: "+keyText(strings.Join(pos, " ")))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err = runCmd(ctx, s, pos)
	if e, ok := asError[*exitError](err); ok {
		if e.err != nil {
			fmt.Fprintf(s.err, "locker %s: %s\n", cmd.name, errorText(e.err))
		}
		return e.code
	}
	if err != nil {
		if _, ok := asError[*usageError](err); ok {
			return cmd.usageError(s, err.Error())
		}
		fmt.Fprintf(s.err, "locker %s: %s\n", cmd.name, errorText(err))
		if errors.Is(err, locker.ErrUnavailable) {
			return exitUnavailable
		}
		return 1
	}
	return 0
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// help is "locker help [COMMAND]": the command list, or one command's help, on stdout.
func help(args []string, s *streams) int {
	if len(args) == 0 {
		usage(s.out)
		return 0
	}
	cmd := lookup(args[0])
	if cmd == nil || len(args) > 1 {
		fmt.Fprintf(s.err, "locker help: unknown command %s\nRun 'locker help' for the commands.\n", display.Key(strings.Join(args, " ")))
		return 2
	}
	fs := flag.NewFlagSet("locker "+cmd.name, flag.ContinueOnError)
	cmd.setup(fs)
	cmd.usage(s.out, fs)
	return 0
}

// usageError prints a usage error of the command, msg, in one line and a pointer to its help,
// and returns exit code 2.
func (c *command) usageError(s *streams, msg string) int {
	fmt.Fprintf(s.err, "locker %s: %s\nRun 'locker %s --help' for usage.\n", c.name, msg, c.name)
	return 2
}

// versionLine is "locker VERSION (GO, commit REVISION of DATE)" from the build information: the
// module version (with go install, or a pseudo-version made from the checkout), or "devel" with
// the commit and its date when the build has no version but its VCS revision, or a note that
// the build has neither (go build -buildvcs=false, or no git).
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "locker (unknown version: the binary has no build information) (" + runtime.Version() + ")"
	}
	return describeBuild(bi)
}

// describeBuild is versionLine for the build information bi.
func describeBuild(bi *debug.BuildInfo) string {
	version, details := bi.Main.Version, []string{bi.GoVersion}
	var revision, date string
	modified := false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			revision = st.Value[:min(12, len(st.Value))]
		case "vcs.time":
			date = st.Value
		case "vcs.modified":
			modified = st.Value == "true"
		}
	}
	if version == "" || version == "(devel)" {
		version = "devel"
		if revision == "" {
			details = append(details, "no module version nor VCS revision: built with -buildvcs=false, or outside a git checkout")
		}
	}
	if revision != "" {
		commit := "commit " + revision
		if date != "" {
			commit += " of " + date
		}
		details = append(details, commit)
	}
	if modified {
		details = append(details, "modified")
	}
	return fmt.Sprintf("locker %s (%s)", version, strings.Join(details, ", "))
}

// parse parses the flags in args and returns the positional arguments. Unless c.rawArgs, flags
// may follow positional arguments; after "--" everything is positional.
func (c *command) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if c.rawArgs || len(rest) == 0 {
			return append(pos, rest...), nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usage prints the list of commands.
func usage(w io.Writer) {
	fmt.Fprint(w, "locker runs, shows and removes the reentrant, leased locks of github.com/hashlock/locker.\n\n")
	fmt.Fprint(w, "Usage:\n\n\tlocker <command> [flags] [arguments]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\t%-8s %s\n\t%-8s %s\n", "help", "show the commands, or one command's help: locker help COMMAND",
		"version", "show the version (also --version)")
	fmt.Fprintf(w, "\nRun 'locker help <command>' for the flags of a command.\n"+
		"The Redis server is --redis URL, or $%s (demo: an embedded miniredis by default);\n"+
		"or PostgreSQL: --postgres URL.\n", redisEnv)
}

// usage prints the command's help and flags.
func (c *command) usage(w io.Writer, fs *flag.FlagSet) {
	line := "locker " + c.name + " [flags]"
	if c.args != "" {
		line += " " + c.args
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", line, c.help)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// asError is errors.AsType of Go 1.26, for the Go 1.25 this module supports: the first error in
// err's tree of type E, if any.
func asError[E error](err error) (E, bool) {
	var e E
	ok := errors.As(err, &e)
	return e, ok
}
