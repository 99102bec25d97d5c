package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/sim"
)

// hostsResolver answers each name with its own addresses; other names have none.
type hostsResolver map[string][]string

func (h hostsResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if a, ok := h[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", host)
}

// LookupAddr knows no reverse names.
func (h hostsResolver) LookupAddr(_ context.Context, addr string) ([]string, error) {
	return nil, fmt.Errorf("lookup %s: no PTR record", addr)
}

// Inspect resolves replicas_from once and reports the replicas it finds as it reports listed
// ones; a name that does not resolve is a failure of its own, named.
func TestInspectResolvesReplicasFrom(t *testing.T) {
	s := startSim(t, sim.Config{Name: "found", Addr: "127.0.0.2:0", Version: "0.11.2"})
	port := strings.TrimPrefix(s.URL(), "http://127.0.0.2:")
	cfg, err := config.Parse(fmt.Appendf(nil, `store: "memory:"
models:
  - name: sim-model
    replicas_from: {dns: engines.test, port: %s}
  - name: other
    replicas_from: {dns: missing.test, port: %s}
`, port, port))
	if err != nil {
		t.Fatal(err)
	}
	reports, err := gateway.Inspect(testCtx(t), cfg, gateway.Options{Resolver: hostsResolver{"engines.test": {"127.0.0.2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports: %+v", len(reports), reports)
	}
	found, missing := reports[0], reports[1]
	if found.Replica != "127.0.0.2:"+port || found.Kind != "vllm" || found.Version != "0.11.2" || !slices.Equal(found.Served, []string{"sim-model"}) ||
		len(found.Problems) != 0 || !slices.Equal(found.APIs, []string{"chat", "completions", "messages", "responses"}) {
		t.Fatalf("found: %+v", found)
	}
	if missing.Model != "other" || len(missing.Problems) != 1 || !strings.Contains(missing.Problems[0], "missing.test") {
		t.Fatalf("missing: %+v", missing)
	}
}
