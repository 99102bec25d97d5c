package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionReportsTheVCSStamp(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/fencegate/fencegate", Version: "v0.0.0-20261130131738-bce907de4fad+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "bce907de4fad35c1e7025b024c986192ec5becaa"},
			{Key: "vcs.time", Value: "2026-11-30T13:17:38Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	v := versionOf(info)
	if v.Revision != "bce907de4fad35c1e7025b024c986192ec5becaa" || v.Time != "2026-11-30T13:17:38Z" ||
		v.Modified == nil || !*v.Modified || v.VCS != "git" || v.Version != info.Main.Version {
		t.Fatalf("version %+v", v)
	}
	var out bytes.Buffer
	writeVersion(&out, v)
	for _, want := range []string{"fencegate v0.0.0-20261130131738-bce907de4fad+dirty\n", "revision  bce907de4fad35c1e7025b024c986192ec5becaa\n",
		"time      2026-11-30T13:17:38Z\n", "modified  true\n", "go        go1.26.8\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// Without a stamp: "(devel)", no revision, and modified unknown rather than false.
	v = versionOf(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/fencegate/fencegate", Version: "(devel)"}})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"module":"github.com/fencegate/fencegate","version":"(devel)","go":"go1.26.8"}` {
		t.Fatalf("unstamped JSON %s", b)
	}
	out.Reset()
	writeVersion(&out, v)
	if !strings.Contains(out.String(), "fencegate (devel)\n") || !strings.Contains(out.String(), "revision  unknown") {
		t.Fatalf("unstamped output:\n%s", out.String())
	}
}

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"version", "--json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var v buildVersion
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.GoVersion == "" || v.Version == "" {
		t.Fatalf("version --json printed %q: %v", out.String(), err)
	}
	if err := run(t.Context(), []string{"version", "extra"}, &out, &out); err == nil {
		t.Fatal("version with an argument must fail")
	}
}

// A binary built from this repository reports the same revision, time and modified flag as
// `go version -m` reads from it, and the revision is the checked-out commit.
func TestVersionMatchesGoVersionM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git work tree")
	}
	if top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err == nil && !fi.IsDir() {
			// The go command looks for a .git directory; a linked work tree (git worktree
			// add) has a .git file, and its builds carry no VCS information at all.
			t.Skip("a linked git work tree: the go command stamps no VCS information here")
		}
	}
	bin := filepath.Join(t.TempDir(), "fencegate")
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command(goCmd, append(args, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var got buildVersion
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	m, err := exec.Command(goCmd, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := buildVersion{GoVersion: strings.TrimSpace(strings.SplitN(strings.SplitN(string(m), "\n", 2)[0], ": ", 2)[1])}
	for _, line := range strings.Split(string(m), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		switch {
		case len(f) >= 3 && f[0] == "mod":
			want.Module, want.Version = f[1], f[2]
		case len(f) == 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			switch k {
			case "vcs":
				want.VCS = v
			case "vcs.revision":
				want.Revision = v
			case "vcs.time":
				want.Time = v
			case "vcs.modified":
				b := v == "true"
				want.Modified = &b
			}
		}
	}
	if want.Revision != strings.TrimSpace(string(head)) {
		t.Fatalf("go version -m says revision %q, git says %q", want.Revision, head)
	}
	if got.Module != want.Module || got.Version != want.Version || got.GoVersion != want.GoVersion || got.VCS != want.VCS ||
		got.Revision != want.Revision || got.Time != want.Time || got.Modified == nil || *got.Modified != *want.Modified {
		t.Fatalf("fencegate version says %s\ngo version -m says:\n%s", out, m)
	}
}
