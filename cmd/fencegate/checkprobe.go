package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
)

// probeReplicas is check --probe: every replica contacted once, as a starting gateway would
// (gateway.Inspect), and a paragraph each; the error says how many failed.
func probeReplicas(ctx context.Context, cfg *config.Config, stdout io.Writer) error {
	reports, err := gateway.Inspect(ctx, cfg, gateway.Options{})
	if err != nil {
		return fmt.Errorf("check --probe: %w", err)
	}
	failed := 0
	for _, r := range reports {
		verdict := "ok"
		if len(r.Problems) > 0 {
			verdict, failed = "FAILED", failed+1
		}
		via := ""
		if r.Agent {
			via = " (through its agent)"
		}
		fmt.Fprintf(stdout, "\n%s %s %s%s: %s\n", r.Model, r.Replica, r.URL, via, verdict)
		kind := r.Kind
		switch {
		case kind == "" && r.Served == nil:
			kind = "unknown (no answer)"
		case kind == "":
			kind = "unknown (its metrics name none; engine: in the configuration names it)"
		}
		if r.Version != "" {
			kind += " " + r.Version
		}
		fmt.Fprintf(stdout, "  engine:      %s\n", kind)
		if r.Served != nil {
			fmt.Fprintf(stdout, "  serves:      %s\n", strings.Join(r.Served, ", "))
		}
		apis := "none"
		if len(r.APIs) > 0 {
			apis = strings.Join(r.APIs, ", ")
		}
		fmt.Fprintf(stdout, "  APIs:        %s\n", apis)
		if len(r.Fingerprint) > 0 {
			keys := make([]string, 0, len(r.Fingerprint))
			for k := range r.Fingerprint {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + "=" + r.Fingerprint[k]
			}
			fmt.Fprintf(stdout, "  fingerprint: %s\n", strings.Join(parts, " "))
		}
		for _, p := range r.Problems {
			fmt.Fprintf(stdout, "  problem:     %s\n", p)
		}
	}
	fmt.Fprintln(stdout)
	for _, m := range cfg.Models {
		if gap := gateway.UnservedAPIs(m.Name, reports); len(gap) > 0 {
			fmt.Fprintf(stdout, "note: no replica of %s serves %s: those requests get the engine's 404\n", m.Name, strings.Join(gap, ", "))
		}
	}
	if failed > 0 {
		return fmt.Errorf("check --probe: %d of %d replicas failed", failed, len(reports))
	}
	fmt.Fprintf(stdout, "probe: all %d replicas passed\n", len(reports))
	return nil
}
