package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
)

// cacheProbes counts the cache check's probes a replica received: cold and warm ones.
func cacheProbes(s *sim.Server) (cold, warm int) {
	for _, r := range s.Records() {
		switch {
		case !strings.HasPrefix(r.RequestID, "canary_cache_"):
		case strings.HasSuffix(r.RequestID, "_cold"):
			cold++
		case strings.HasSuffix(r.RequestID, "_warm"):
			warm++
		}
	}
	return cold, warm
}

// cacheFaultEnv runs three replicas of one weights, the second with the block-boundary
// cache fault, on their own journal store.
func cacheFaultEnv(t *testing.T, c config.Canary, cfg func(*config.Config)) (*env, store.Store) {
	st, err := store.Open(context.Background(), "memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if c.Every == 0 {
		c.Every = config.Duration(3600e9) // the test runs the checks
	}
	e := newEnv(t, envOptions{
		replicas: 3,
		store:    st,
		sim: func(i int, sc *sim.Config) {
			sc.Weights = "w1"
			if i == 1 {
				sc.CacheFault = sim.CacheFaultBlockBoundary
			}
		},
		config: func(conf *config.Config) {
			conf.Models[0].Canary = &c
			if cfg != nil {
				cfg(conf)
			}
		},
	})
	return e, st
}

// A replica whose cache changes the answer of a prompt cached to a block edge is marked
// cache_diverges by the first check, with the evidence in /readyz and the metric; the
// other two agree; the probes are the gateway's own: no journal rows, no request metrics.
// Reruns then never go to it, while it still serves new requests of its own.
func TestCanaryCacheFaultFound(t *testing.T) {
	e, st := cacheFaultEnv(t, config.Canary{MaxTokens: 8, CompareTokens: 4}, func(c *config.Config) {
		// sim-1 serves first; a rerun chooses between sim-2 (the faulty cache), which the
		// pool prefers when nothing else tells them apart, and sim-3.
		c.Models[0].Replicas[1].Priority = 1
		c.Models[0].Replicas[2].Priority = 1
	})
	e.gw.CheckCanaries(context.Background())
	for _, n := range []string{"sim-1", "sim-3"} {
		if c := e.canaryOf(n); c["state"] != "agrees" || c["cache_check"] != "agrees" {
			t.Fatalf("%s: %v", n, c)
		}
	}
	c := e.canaryOf("sim-2")
	ev, _ := c["cache"].(map[string]any)
	if c["state"] != "cache_diverges" || ev == nil || c["first_differing_token"] == nil ||
		!strings.Contains(c["detail"].(string), "block size 16") {
		t.Fatalf("sim-2: %v", c)
	}
	// The default lengths straddle 32 and 48 (16−1 is too short a prompt); the fault
	// changes the answer at 32+1, the shortest length it reaches.
	if ev["prompt_tokens"] != float64(33) || ev["block_size"] != float64(16) || ev["cold_answer"] == ev["warm_answer"] ||
		ev["cold_answer"] == "" || ev["warm_answer"] == "" {
		t.Fatalf("sim-2's evidence: %v", ev)
	}
	m := e.metrics()
	for _, want := range []string{
		`fencegate_replica_canary{model="sim-model",replica="sim-2",state="cache_diverges"} 1`,
		`fencegate_replica_canary{model="sim-model",replica="sim-2",state="agrees"} 0`,
		`fencegate_replica_canary{model="sim-model",replica="sim-1",state="agrees"} 1`,
		`fencegate_replica_canary{model="sim-model",replica="sim-3",state="cache_diverges"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, "fencegate_requests_total{") || strings.Contains(m, "fencegate_attempts_total{") {
		t.Error("the canary's probes were counted as client requests")
	}
	if rows, err := st.Recent(context.Background(), store.RecentQuery{}); err != nil || len(rows) != 0 {
		t.Fatalf("the canary's probes left %d journal rows (%v)", len(rows), err)
	}
	// Four lengths, a pair each; the faulty replica is asked again at the two lengths
	// whose pairs differed (33 and 49).
	for i, want := range []int{4, 6, 4} {
		if cold, warm := cacheProbes(e.sims[i]); cold != want || warm != want {
			t.Errorf("sim-%d: %d cold and %d warm probes, want %d each", i+1, cold, warm, want)
		}
	}
	if st, _ := e.replicaState("sim-2"); st != "healthy" {
		t.Fatalf("exclude_from reruns keeps new work: state %s", st)
	}

	const n = 4
	e.sims[0].ArmFault("status:500@accept", n)
	for i := range n {
		r := e.stream(testCtx(t), chatParams(fmt.Sprintf("rerun me %d", i), 3))
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		if got := len(e.simRequests(1, r.requestID)); got != 0 {
			t.Fatalf("request %d was rerun on the replica whose cache changes answers", i)
		}
		if got := len(e.simRequests(2, r.requestID)); got != 1 {
			t.Fatalf("request %d: %d attempts on sim-3, want its rerun", i, got)
		}
	}
}

// With exclude_from: all the replica whose cache changes answers gets no work at all.
func TestCanaryCacheFaultExcludeFromAll(t *testing.T) {
	e, _ := cacheFaultEnv(t, config.Canary{ExcludeFrom: "all"}, nil)
	e.gw.CheckCanaries(context.Background())
	st, reason := e.replicaState("sim-2")
	if st != "incompatible" || !strings.HasPrefix(reason, "canary: its cache changes its answers: ") {
		t.Fatalf("sim-2: %s (%s)", st, reason)
	}
	for i := range 6 {
		if r := e.stream(testCtx(t), chatParams(fmt.Sprintf("q%d", i), 2)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if _, others := canaryProbes(e.sims[1]); others != 0 {
		t.Fatalf("the excluded replica served %d requests", others)
	}
	// It is still checked, and stays out while its cache is at fault. (The group probe,
	// 17 tokens on the simulator, is itself cached to a block edge the second time: the
	// replica may now answer it unlike its group too, which keeps it out as well.)
	e.gw.CheckCanaries(context.Background())
	c := e.canaryOf("sim-2")
	if (c["state"] != "cache_diverges" && c["state"] != "diverges") || c["cache_check"] != "cache_diverges" {
		t.Fatalf("sim-2 after a second check: %v", c)
	}
	if st, _ := e.replicaState("sim-2"); st != "incompatible" {
		t.Fatalf("sim-2 after a second check: %s", st)
	}
}

// Healthy replicas stay agrees with the cache check over many periods: greedy and seeded,
// the warm answer is the cold one. A replica alone in its fingerprint group is checked
// against itself all the same.
func TestCanaryCacheNoFalseAlarm(t *testing.T) {
	e := canaryEnv(t, []string{"w1", "w1", "w2"}, config.Canary{MaxTokens: 8, CompareTokens: 8}, func(i int, c *sim.Config) {
		if i == 2 {
			c.Revision = "other" // a group of its own
		}
	}, nil)
	const periods = 12
	for range periods {
		e.gw.CheckCanaries(context.Background())
		for _, n := range []string{"sim-1", "sim-2"} {
			if c := e.canaryOf(n); c["state"] != "agrees" || c["cache_check"] != "agrees" {
				t.Fatalf("%s: %v", n, c)
			}
		}
		if c := e.canaryOf("sim-3"); c["state"] != "unknown" || c["cache_check"] != "agrees" {
			t.Fatalf("sim-3: %v", c)
		}
	}
	for i, s := range e.sims {
		if cold, warm := cacheProbes(s); cold != 4*periods || warm != 4*periods {
			t.Errorf("sim-%d: %d cold and %d warm probes over %d periods", i+1, cold, warm, periods)
		}
		// The engine's own metrics show the warm probes' cache hits: at 31, 33, 47 and 49
		// tokens, 16+32+32+48 cached tokens a period.
		if hits := simCounter(t, s, "vllm:prefix_cache_hits_total"); hits < 128*periods {
			t.Errorf("sim-%d: %v prefix cache hits over %d periods", i+1, hits, periods)
		}
	}
}

// simCounter reads a counter of a simulated replica's /metrics.
func simCounter(t *testing.T, s *sim.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no %s in the replica's metrics", name)
	return 0
}

// The check is off with cache_check: false; and with blocks of another size the lengths
// follow the engine's block_size, the fault found at the new edge.
func TestCanaryCacheCheckConfig(t *testing.T) {
	off := false
	e := canaryEnv(t, []string{"w1", "w1"}, config.Canary{CacheCheck: &off}, nil, nil)
	e.gw.CheckCanaries(context.Background())
	if cold, _ := cacheProbes(e.sims[0]); cold != 0 {
		t.Fatalf("%d cache probes with the check off", cold)
	}
	if c := e.canaryOf("sim-1"); c["state"] != "agrees" || c["cache_check"] != nil {
		t.Fatalf("sim-1: %v", c)
	}

	e = canaryEnv(t, []string{"w1", "w1"}, config.Canary{CacheBlocks: []int{3}}, func(i int, c *sim.Config) {
		c.CacheConfig = map[string]string{"block_size": "32"}
		if i == 1 {
			c.CacheFault = sim.CacheFaultBlockBoundary
		}
	}, nil)
	e.gw.CheckCanaries(context.Background())
	c := e.canaryOf("sim-2")
	ev, _ := c["cache"].(map[string]any)
	if c["state"] != "cache_diverges" || ev["prompt_tokens"] != float64(97) || ev["block_size"] != float64(32) {
		t.Fatalf("sim-2: %v", c)
	}
}
