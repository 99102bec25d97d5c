package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/fencegate/fencegate/internal/cli"
)

// buildVersion is what `fencegate version` reports: the main module's version and the
// version control stamp the go command wrote into the binary, the same values
// `go version -m` prints. Nothing is set by hand at build time, so an image, a release
// archive and a local build all answer from the same source.
type buildVersion struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	GoVersion string `json:"go"`
	VCS       string `json:"vcs,omitempty"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	// Modified is absent when unknown (a build without a VCS stamp), which is not the same
	// as false.
	Modified *bool `json:"modified,omitempty"`
}

func version(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fencegate version [--json]\n\nPrints the module version and the revision the binary was built from.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args, "version"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("version: unexpected arguments %q", fs.Args())
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("version: this binary carries no build information")
	}
	v := versionOf(info)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	writeVersion(stdout, v)
	return nil
}

// versionOf picks the reported values out of the build information.
func versionOf(info *debug.BuildInfo) buildVersion {
	v := buildVersion{Module: info.Main.Path, Version: info.Main.Version, GoVersion: info.GoVersion}
	if v.Version == "" {
		// A test binary, or a build from a work tree by a go command that stamps none.
		v.Version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs":
			v.VCS = s.Value
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

func writeVersion(w io.Writer, v buildVersion) {
	fmt.Fprintf(w, "fencegate %s\n", v.Version)
	fmt.Fprintf(w, "  module    %s\n", v.Module)
	if v.Revision == "" {
		// -buildvcs=false, a source tree without its .git, or a container build whose
		// context left .git out.
		fmt.Fprintf(w, "  revision  unknown (built without version control information)\n")
	} else {
		fmt.Fprintf(w, "  revision  %s\n", v.Revision)
		if v.Time != "" {
			fmt.Fprintf(w, "  time      %s\n", v.Time)
		}
		if v.Modified != nil {
			fmt.Fprintf(w, "  modified  %t\n", *v.Modified)
		}
	}
	fmt.Fprintf(w, "  go        %s\n", v.GoVersion)
}
