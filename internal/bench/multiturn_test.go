package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/sim"
)

// The multiturn workload sends each conversation's turns in order with their history:
// pinned to one engine each, every turn after the first finds its history in that
// engine's prefix cache, and the report's hit rate is the engines' own counters'.
func TestMultiturnPinnedFindsHistoryCached(t *testing.T) {
	engines := []*sim.Server{startSim(t, sim.Config{Name: "a"}), startSim(t, sim.Config{Name: "b"})}
	var urls []string
	for _, e := range engines {
		urls = append(urls, e.URL())
	}
	opts := bench.Options{Model: "sim-model", MaxTokens: 4, Concurrency: 3, IgnoreEOS: true}
	mt := bench.Multiturn{Conversations: 4, Turns: 3, SystemPrompts: 1, SystemBytes: 2000, TurnBytes: 200, Seed: 7,
		Route: "pinned", Engines: urls}
	rep, err := bench.RunMultiturn(context.Background(), opts, mt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 12 || rep.Errors != 0 || rep.TTFT.Count != 12 {
		t.Fatalf("report %+v: want 12 requests, no errors", rep)
	}
	for i, e := range engines {
		recs := e.Records()
		if len(recs) != 6 || rep.PerEngineReqs[i] != 6 {
			t.Fatalf("engine %d served %d requests (report %v), want conversations %d and %d: 6", i, len(recs), rep.PerEngineReqs, i, i+2)
		}
		// All but the engine's first request find something cached: the shared system
		// prompt, and from a conversation's second turn on its history too.
		cached := 0
		for _, r := range recs {
			if r.CachedTokens > 0 {
				cached++
			}
		}
		if cached != 5 {
			t.Fatalf("engine %d: %d of its 6 requests found a cached prefix, want 5", i, cached)
		}
	}
	if rep.HitRate <= 0.3 || rep.HitRate >= 1 {
		t.Fatalf("hit rate %.3f: want the history's share of the prompts", rep.HitRate)
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil || !strings.Contains(out.String(), "prefix cache hit rate") {
		t.Fatalf("text report %q, %v", out.String(), err)
	}
}
