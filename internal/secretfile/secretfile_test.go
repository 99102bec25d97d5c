package secretfile

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in      string
		current string
		accepts []string
		refuses []string
		err     string
	}{
		{in: "  one \n", current: "one", accepts: []string{"one"}, refuses: []string{"", "on", "one ", "two"}},
		{in: "one\ntwo\n", current: "one", accepts: []string{"one", "two"}, refuses: []string{"", "onetwo", "one\ntwo"}},
		{in: "\n\none\n\n  \ntwo", current: "one", accepts: []string{"one", "two"}},
		{in: "", err: "holds no secret"},
		{in: " \n\t\n", err: "holds no secret"},
		{in: "a\nb\nc\n", err: "holds 3 secrets; at most 2"},
	} {
		s, err := Parse([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q): %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || s.Current() != c.current {
			t.Errorf("Parse(%q): %v, current %q", c.in, err, s.Current())
			continue
		}
		for _, a := range c.accepts {
			if !s.Accepts(a) {
				t.Errorf("Parse(%q) refuses %q", c.in, a)
			}
		}
		for _, r := range c.refuses {
			if s.Accepts(r) {
				t.Errorf("Parse(%q) accepts %q", c.in, r)
			}
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A file that changes is read again; one that becomes unreadable, empty or overfull is an
// error and the secrets read last stay.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a missing file: %v", err)
	}
	write(t, path, "old\n")
	f, err := Load(path)
	if err != nil || f.Current() != "old" {
		t.Fatalf("Load: %v %q", err, f.Current())
	}
	if changed, err := f.Reload(); changed || err != nil {
		t.Fatalf("an unchanged file: %v %v", changed, err)
	}
	write(t, path, "old\nnew\n")
	if changed, err := f.Reload(); !changed || err != nil || f.Current() != "old" || !f.Accepts("new") {
		t.Fatalf("the next secret added: %v %v %q", changed, err, f.Current())
	}
	for _, bad := range []string{"", "a\nb\nc\n"} {
		write(t, path, bad)
		if _, err := f.Reload(); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("a bad file %q: %v", bad, err)
		}
		if f.Current() != "old" || !f.Accepts("new") {
			t.Fatalf("after a bad file the secrets read last do not stand: %q", f.Current())
		}
	}
	os.Remove(path)
	if _, err := f.Reload(); err == nil || f.Current() != "old" {
		t.Fatalf("a removed file: %v %q", err, f.Current())
	}
	var none *File
	if none.Current() != "" || none.Accepts("") || none.Accepts("old") {
		t.Fatal("a nil File holds a secret")
	}
	if Fixed("") != nil || Fixed("x").Current() != "x" {
		t.Fatal("Fixed")
	}
}

// Watch reads the file every period on the clock, as a Kubernetes Secret volume changes it
// in place, and logs each change and each new error once.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "secret")
		write(t, path, "old\n")
		f, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			f.Watch(ctx, DefaultPoll, "agent secret", slog.New(slog.NewTextHandler(&logs, nil)), nil)
			close(done)
		}()
		write(t, path, "new\nold\n")
		synctest.Wait()
		if f.Current() != "old" {
			t.Fatal("read again before the period passed")
		}
		for range 3 { // three periods: one change, two unchanged reads
			synctest.Wait()
			time.Sleep(DefaultPoll)
		}
		synctest.Wait()
		if f.Current() != "new" || !f.Accepts("old") {
			t.Fatalf("after the period: current %q", f.Current())
		}
		write(t, path, "")
		for range 3 { // three periods of an empty file: logged once
			time.Sleep(DefaultPoll)
			synctest.Wait()
		}
		cancel()
		<-done
		if n := strings.Count(logs.String(), "agent secret read again"); n != 1 || !strings.Contains(logs.String(), "secrets=2") {
			t.Errorf("changes logged %d times: %s", n, logs.String())
		}
		if n := strings.Count(logs.String(), "holds no secret"); n != 1 || strings.Contains(logs.String(), "new") {
			t.Errorf("errors logged %d times (or a secret logged): %s", n, logs.String())
		}
	})
}
