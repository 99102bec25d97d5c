package config

import (
	"fmt"
	"strings"
)

// TraceMode says which requests keep a trace document (docs/design.md §7, Traces).
type TraceMode string

// The trace modes. An API key's mode may be left empty: it then follows the gateway's.
const (
	// TracesOff keeps no trace (the default: inputs may be private).
	TracesOff TraceMode = "off"
	// TracesErrors keeps the trace of a request that did not complete: an interruption, an
	// error, a client that left or stalled.
	TracesErrors TraceMode = "errors"
	// TracesAll keeps every request's trace.
	TracesAll TraceMode = "all"
)

// DefaultTraceMaxBytes is how much of what a client received a trace keeps as text; past
// it, each further event is kept as its SHA-256 and length.
const DefaultTraceMaxBytes = 1 << 20

// Traces configures the trace documents of requests. It is written either as a mapping
// ({mode: errors, max_bytes: 65536}) or, as before the modes existed, as a boolean
// (traces: true is mode all, false is off) or a bare mode (traces: errors).
type Traces struct {
	// Mode is off (the default), errors or all.
	Mode TraceMode `yaml:"mode"`
	// MaxBytes bounds the text of what the client received kept in one trace. Default 1 MiB.
	MaxBytes int `yaml:"max_bytes"`
}

// UnmarshalYAML accepts the mapping, and the older boolean or a bare mode.
func (t *Traces) UnmarshalYAML(unmarshal func(any) error) error {
	var scalar string
	if err := unmarshal(&scalar); err == nil {
		*t = Traces{Mode: TraceMode(scalar)}
		return nil
	}
	type plain Traces // without this method, so the mapping decodes as a struct
	var p plain
	if err := unmarshal(&p); err != nil {
		return err
	}
	*t = Traces(p)
	return nil
}

// Keeps reports whether a request that ended (completed or not) keeps its trace in mode m.
func (m TraceMode) Keeps(completed bool) bool {
	switch m {
	case TracesAll:
		return true
	case TracesErrors:
		return !completed
	}
	return false
}

// normalize maps the boolean spellings to modes and checks the value; empty stays empty
// (the caller decides what that means).
func (m *TraceMode) normalize(field string) error {
	switch s := TraceMode(strings.ToLower(string(*m))); s {
	case "true":
		*m = TracesAll
	case "false":
		*m = TracesOff
	case "", TracesOff, TracesErrors, TracesAll:
		*m = s
	default:
		return fmt.Errorf("%s: %q is not off, errors or all (or true/false)", field, string(*m))
	}
	return nil
}

func (t *Traces) validate() error {
	if err := t.Mode.normalize("traces.mode"); err != nil {
		return err
	}
	if t.Mode == "" {
		t.Mode = TracesOff
	}
	switch {
	case t.MaxBytes == 0:
		t.MaxBytes = DefaultTraceMaxBytes
	case t.MaxBytes < 0:
		return fmt.Errorf("traces.max_bytes: %d must be positive", t.MaxBytes)
	}
	return nil
}
