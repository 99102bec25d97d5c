// Package cli holds what every fencegate subcommand's command line shares: parsing flags so
// that --help is an answer (its usage on the command's output, exit status 0) and a bad
// flag an error said once (exit status 2).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// UsageError is a mistake in a command line: the process exits with status 2, and the
// message is printed once, by whoever prints errors (the flag package prints nothing).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// Parse parses args with fs. -h or --help writes fs's usage (its Usage function, as set)
// to fs's output and returns flag.ErrHelp, which callers turn into exit status 0. A bad
// flag prints nothing and returns a UsageError that names the command and how to list its
// flags, so the caller prints it once: the flag package would print the message and the
// whole usage itself, and the caller the message again.
func Parse(fs *flag.FlagSet, args []string, command string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		usage()
		return flag.ErrHelp
	}
	return Usagef("%s: %w (fencegate %s --help lists its flags)", command, err, command)
}
