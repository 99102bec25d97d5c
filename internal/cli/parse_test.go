package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func newFlags(out *bytes.Buffer) (*flag.FlagSet, *int) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fs.Output().Write([]byte("Usage: x\n")); fs.PrintDefaults() }
	n := fs.Int("n", 1, "a number")
	return fs, n
}

// --help prints the usage on the flag set's output and is flag.ErrHelp; a bad flag prints
// nothing and is a UsageError naming the command; good flags parse.
func TestParse(t *testing.T) {
	var out bytes.Buffer
	fs, _ := newFlags(&out)
	if err := Parse(fs, []string{"--help"}, "x"); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage: x") || !strings.Contains(out.String(), "-n int") {
		t.Fatalf("--help: %v, printed %q", err, out.String())
	}
	out.Reset()
	fs, _ = newFlags(&out)
	err := Parse(fs, []string{"--n", "two"}, "x")
	var ue *UsageError
	if !errors.As(err, &ue) || out.Len() != 0 || !strings.HasPrefix(err.Error(), `x: invalid value "two" for flag -n`) || !strings.Contains(err.Error(), "fencegate x --help") {
		t.Fatalf("bad value: %v, printed %q", err, out.String())
	}
	// The usage still goes to the flag set's output afterwards.
	fs.Usage()
	if !strings.Contains(out.String(), "Usage: x") {
		t.Fatalf("usage after a failed parse: %q", out.String())
	}
	fs, n := newFlags(&out)
	if err := Parse(fs, []string{"--n", "3", "rest"}, "x"); err != nil || *n != 3 || fs.Arg(0) != "rest" {
		t.Fatalf("good flags: %v %d %v", err, *n, fs.Args())
	}
}
