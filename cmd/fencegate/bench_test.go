package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
)

// `fencegate bench` is wired to the load generator and listed in the usage.
func TestBenchCommand(t *testing.T) {
	s, err := sim.Start(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	err = run(context.Background(), []string{"bench", "--url", s.URL(), "--requests", "4", "--concurrency", "2", "--max-tokens", "4"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "requests  4 succeeded, 0 failed") {
		t.Fatalf("bench printed\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"help"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "fencegate bench") {
		t.Fatalf("usage without bench: %v\n%s", err, out.String())
	}
}
