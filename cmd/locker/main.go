// Command locker is the command-line companion of the locker package
// (github.com/hashlock/locker): it shows and exercises reentrant, leased locks.
//
// Usage:
//
//	locker <command> [flags]
//
// The commands are:
//
//	demo    two workers contend for one lock: waiting, re-entry, watchdog renewals,
//	        takeover on release, and a check that mutual exclusion held
//
// The demo runs on an in-process backend, so "go run ./cmd/locker demo" needs no set-up.
// Run "locker <command> --help" for the flags of a command.
//
// Exit codes:
//
//	0  success (or help was asked for)
//	1  failure: an error from the library or the backend, or a failed check
//	2  usage error: unknown command, bad flag or flag value
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// A command is one subcommand of locker.
type command struct {
	name    string
	summary string // one line, for the command list
	help    string // a paragraph, for the command's --help
	// setup defines the command's flags on fs and returns the function that runs the command
	// once they are parsed. That function returns a *usageError for a bad flag value.
	setup func(fs *flag.FlagSet) func(ctx context.Context, stdout io.Writer) error
}

var commands = []command{demoCommand}

// A usageError is a bad flag value or argument: exit code 2 instead of 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// run is the whole command: it returns the exit code instead of exiting, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "locker: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}

	fs := flag.NewFlagSet("locker "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports parse errors itself, with the command's usage
	runCmd := cmd.setup(fs)
	err := fs.Parse(args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		cmd.usage(stdout, fs)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "locker %s: %v\n\n", cmd.name, err)
		cmd.usage(stderr, fs)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "locker %s: unexpected arguments: %s\n\n", cmd.name, strings.Join(fs.Args(), " "))
		cmd.usage(stderr, fs)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runCmd(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "locker %s: %v\n", cmd.name, err)
		if _, ok := errors.AsType[*usageError](err); ok {
			fmt.Fprintf(stderr, "Run 'locker %s --help' for usage.\n", cmd.name)
			return 2
		}
		return 1
	}
	return 0
}

// usage prints the list of commands.
func usage(w io.Writer) {
	fmt.Fprint(w, "locker shows and exercises the reentrant, leased locks of github.com/hashlock/locker.\n\n")
	fmt.Fprint(w, "Usage:\n\n\tlocker <command> [flags]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'locker <command> --help' for the flags of a command.\n")
}

// usage prints the command's help and flags.
func (c *command) usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: locker %s [flags]\n\n%s\n\nFlags:\n", c.name, c.help)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
