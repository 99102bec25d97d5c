package config

import (
	"strings"
	"testing"
)

const tracesBase = "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"

// traces: takes the mapping, the older boolean and a bare mode; max_bytes defaults to 1 MiB.
func TestTracesConfig(t *testing.T) {
	for _, c := range []struct {
		in       string
		mode     TraceMode
		maxBytes int
	}{
		{"", TracesOff, DefaultTraceMaxBytes},
		{"traces: false\n", TracesOff, DefaultTraceMaxBytes},
		{"traces: true\n", TracesAll, DefaultTraceMaxBytes},
		{"traces: errors\n", TracesErrors, DefaultTraceMaxBytes},
		{"traces: {mode: off}\n", TracesOff, DefaultTraceMaxBytes},
		{"traces: {mode: errors}\n", TracesErrors, DefaultTraceMaxBytes},
		{"traces:\n  mode: all\n  max_bytes: 4096\n", TracesAll, 4096},
		{"traces: {max_bytes: 10}\n", TracesOff, 10},
		{"traces: {mode: ALL}\n", TracesAll, DefaultTraceMaxBytes},
	} {
		cfg, err := Parse([]byte(tracesBase + c.in))
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if cfg.Traces.Mode != c.mode || cfg.Traces.MaxBytes != c.maxBytes {
			t.Errorf("%q: traces %+v, want mode %s, max_bytes %d", c.in, cfg.Traces, c.mode, c.maxBytes)
		}
	}
}

func TestTracesConfigErrorsNameTheField(t *testing.T) {
	for in, want := range map[string]string{
		"traces: sometimes\n":             `traces.mode: "sometimes" is not off, errors or all`,
		"traces: {mode: verbose}\n":       `traces.mode: "verbose" is not off, errors or all`,
		"traces: {max_bytes: -1}\n":       "traces.max_bytes: -1 must be positive",
		"traces: {mode: all, depth: 3}\n": "depth",
		"auth:\n  keys:\n    - {id: a, key: 0123456789abcdef, traces: loud}\n":      `auth.keys[0].traces: "loud" is not off, errors or all`,
		"auth:\n  admin_keys:\n    - {id: a, key: 0123456789abcdef, traces: all}\n": "auth.admin_keys[0]: admin keys take no models, limits or traces",
	} {
		_, err := Parse([]byte(tracesBase + in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", in, err, want)
		}
	}
}

// A key's traces: overrides the gateway's mode; left out, the key follows the gateway.
func TestKeyTracesOverride(t *testing.T) {
	cfg, err := Parse([]byte(tracesBase + `traces: errors
auth:
  keys:
    - {id: a, key: 0123456789abcdef, traces: all}
    - {id: b, key: fedcba9876543210, traces: false}
    - {id: c, key: 0123456789abcdeg}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := []TraceMode{cfg.Auth.Keys[0].Traces, cfg.Auth.Keys[1].Traces, cfg.Auth.Keys[2].Traces}
	if got[0] != TracesAll || got[1] != TracesOff || got[2] != "" {
		t.Fatalf("key modes %q", got)
	}
}

func TestTraceModeKeeps(t *testing.T) {
	for _, c := range []struct {
		mode      TraceMode
		completed bool
		keeps     bool
	}{
		{TracesOff, true, false}, {TracesOff, false, false},
		{TracesErrors, true, false}, {TracesErrors, false, true},
		{TracesAll, true, true}, {TracesAll, false, true},
		{"", false, false},
	} {
		if got := c.mode.Keeps(c.completed); got != c.keeps {
			t.Errorf("mode %q, completed %t: keeps %t, want %t", c.mode, c.completed, got, c.keeps)
		}
	}
}
