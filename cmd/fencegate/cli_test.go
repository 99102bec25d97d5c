package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs a command line as main does: the output, what goes to stderr (the error
// printed once, as main prints it) and the exit status.
func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	code = exitCode(err, &errOut)
	return out.String(), errOut.String(), code
}

// Every subcommand answers --help with its usage on stdout and exit status 0, as does
// `fencegate help CMD`; a flag it does not know is said once, on stderr, with exit status 2
// and nothing started.
func TestEverySubcommandsHelpAndFlagErrors(t *testing.T) {
	for _, c := range []struct {
		cmd []string
		// flags the usage must list; absent the usage must not (keys' subcommands have
		// flag sets of their own).
		flags, absent []string
	}{
		{[]string{"serve"}, []string{"-config", "-log-format", "FENCEGATE_STORE", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"}, nil},
		{[]string{"check"}, []string{"-config", "-probe"}, nil},
		{[]string{"version"}, []string{"-json"}, nil},
		{[]string{"keys", "create"}, []string{"-config", "-id", "-models", "-max-concurrent", "-rpm", "-tpm", "-traces", "-admin"}, nil},
		{[]string{"keys", "list"}, []string{"-config"}, []string{"-id", "-rpm", "-tpm", "-models", "-admin", "-traces"}},
		{[]string{"keys", "revoke"}, []string{"-config", "-id"}, []string{"-rpm", "-tpm", "-models", "-admin", "-traces"}},
		{[]string{"agent"}, []string{"-engine", "-listen", "-secret-file"}, nil},
		{[]string{"sim"}, []string{"-listen", "-model"}, nil},
		{[]string{"demo"}, []string{"-listen", "-admin-listen", "-replica-base-port"}, nil},
		{[]string{"chaos"}, []string{"-requests", "-seed", "-exhaustive"}, nil},
		{[]string{"bench"}, []string{"-url", "-api", "-compare"}, nil},
		{[]string{"replay"}, []string{"-url", "-header", "-json", "-timeout"}, nil},
	} {
		name := strings.Join(c.cmd, " ")
		for _, help := range [][]string{append(append([]string(nil), c.cmd...), "--help"), append(append([]string(nil), c.cmd...), "-h"), append([]string{"help"}, c.cmd...)} {
			out, errOut, code := runCLI(help...)
			if code != 0 || errOut != "" || !strings.Contains(out, "Usage") {
				t.Errorf("%q: exit status %d, stderr %q, stdout %q", help, code, errOut, out)
				continue
			}
			for _, f := range c.flags {
				if !strings.Contains(out, f) {
					t.Errorf("%q: the usage does not list %s:\n%s", help, f, out)
				}
			}
			for _, f := range c.absent {
				if strings.Contains(out, "  "+f+" ") || strings.Contains(out, "  "+f+"\n") {
					t.Errorf("%q: the usage lists %s, which %s does not take:\n%s", help, f, name, out)
				}
			}
		}
		out, errOut, code := runCLI(append(append([]string(nil), c.cmd...), "--no-such-flag")...)
		if code != 2 || out != "" || strings.Count(errOut, "flag provided but not defined: -no-such-flag") != 1 || !strings.Contains(errOut, "--help") {
			t.Errorf("%s --no-such-flag: exit status %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
}

// The commands themselves: help lists them, and mistakes in the command line are exit
// status 2 with one message.
func TestCommandLineMistakes(t *testing.T) {
	out, errOut, code := runCLI("help")
	if code != 0 || errOut != "" || !strings.Contains(out, "fencegate serve") || !strings.Contains(out, "fencegate help <command>") {
		t.Fatalf("help: %d %q %q", code, out, errOut)
	}
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte("store: \"sqlite:"+filepath.Join(filepath.Dir(path), "fg.db")+"\"\nmodels:\n  - name: m\n    replicas: [{url: 'http://127.0.0.1:1'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"serve"}, "--config is required"},
		{[]string{"serve", "--config", path, "extra"}, "unexpected arguments"},
		{[]string{"check"}, "--config is required"},
		{[]string{"version", "extra"}, "unexpected arguments"},
		{[]string{"keys"}, "no subcommand given"},
		{[]string{"keys", "rotate"}, `unknown subcommand "rotate"`},
		{[]string{"keys", "list", "--rpm", "5", "--config", path}, "flag provided but not defined: -rpm"},
		{[]string{"keys", "revoke", "--models", "m", "--id", "x", "--config", path}, "flag provided but not defined: -models"},
		{[]string{"keys", "list"}, "--config is required"},
		{[]string{"keys", "create", "--id", "x", "--rpm", "-1", "--config", path}, "limits must be >= 0"},
		{[]string{"demo", "extra"}, "unexpected arguments"},
		{[]string{"replay"}, "want one trace file"},
	} {
		_, errOut, code := runCLI(c.args...)
		if code != 2 || strings.Count(errOut, c.want) != 1 {
			t.Errorf("%q: exit status %d, stderr %q; want 2 and %q once", c.args, code, errOut, c.want)
		}
	}
	// keys list with its own flags works.
	if out, errOut, code := runCLI("keys", "list", "--config", path); code != 0 || !strings.HasPrefix(out, "ID") {
		t.Fatalf("keys list: %d %q %q", code, out, errOut)
	}
}
