package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// canaryOf is a replica's canary in /readyz.
func (e *env) canaryOf(name string) map[string]any {
	e.t.Helper()
	for _, p := range e.readyz()["models"].([]any) {
		for _, r := range p.(map[string]any)["replicas"].([]any) {
			m := r.(map[string]any)
			if m["name"] == name {
				c, _ := m["canary"].(map[string]any)
				return c
			}
		}
	}
	e.t.Fatalf("no replica %s in /readyz", name)
	return nil
}

// canaryProbes counts the canary's group probes a replica received, and the requests that
// were no probe of the canary's (the cache check's are neither: see cacheProbes).
func canaryProbes(s *sim.Server) (probes, others int) {
	for _, r := range s.Records() {
		switch {
		case strings.HasPrefix(r.RequestID, "canary_cache_"):
		case strings.HasPrefix(r.RequestID, "canary_"):
			probes++
		default:
			others++
		}
	}
	return probes, others
}

// canaryEnv runs three replicas; weights gives each its Weights (what decides its text).
func canaryEnv(t *testing.T, weights []string, canary config.Canary, more func(i int, c *sim.Config), cfg func(c *config.Config)) *env {
	return newEnv(t, envOptions{
		replicas: len(weights),
		sim: func(i int, c *sim.Config) {
			c.Weights = weights[i]
			if more != nil {
				more(i, c)
			}
		},
		config: func(c *config.Config) {
			if canary.Every == 0 {
				canary.Every = config.Duration(3600e9) // the schedule stays out of the way: the test runs the checks
			}
			c.Models[0].Canary = &canary
			if cfg != nil {
				cfg(c)
			}
		},
	})
}

// A replica given other weights while claiming the same fingerprint is marked diverges by
// one check, with the evidence in /readyz, the metric and no client request counted.
func TestCanaryMarksOtherWeightsDiverging(t *testing.T) {
	e := canaryEnv(t, []string{"w1", "w1", "w2"}, config.Canary{MaxTokens: 8, CompareTokens: 4}, nil, nil)
	if c := e.canaryOf("sim-3"); c["state"] != "unknown" {
		t.Fatalf("before any check: %v", c)
	}
	e.gw.CheckCanaries(context.Background())
	for _, n := range []string{"sim-1", "sim-2"} {
		if c := e.canaryOf(n); c["state"] != "agrees" || c["checked_at"] == nil {
			t.Fatalf("%s: %v", n, c)
		}
	}
	c := e.canaryOf("sim-3")
	if c["state"] != "diverges" || c["first_differing_token"] == nil || c["answer"] == "" || c["majority_answer"] == "" ||
		c["answer"] == c["majority_answer"] || !strings.Contains(c["detail"].(string), "differs") {
		t.Fatalf("sim-3: %v", c)
	}
	if st, _ := e.replicaState("sim-3"); st != "healthy" {
		t.Fatalf("exclude_from reruns keeps new work: state %s", st)
	}
	m := e.metrics()
	for _, want := range []string{
		`fencegate_replica_canary{model="sim-model",replica="sim-3",state="diverges"} 1`,
		`fencegate_replica_canary{model="sim-model",replica="sim-1",state="agrees"} 1`,
		`fencegate_replica_canary{model="sim-model",replica="sim-1",state="diverges"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, "fencegate_requests_total{") || strings.Contains(m, "fencegate_attempts_total{") {
		t.Error("the canary's probes were counted as client requests")
	}
	for i, s := range e.sims {
		probes, others := canaryProbes(s)
		// The two that agree are asked once; the outvoted one twice.
		if want := map[int]int{0: 1, 1: 1, 2: 2}[i]; probes != want || others != 0 {
			t.Errorf("sim-%d: %d probes (want %d), %d other requests", i+1, probes, want, others)
		}
	}
}

// A request whose first replica fails before any output is rerun on a replica that agrees,
// never on the one that diverges, which still serves new requests of its own.
func TestCanaryKeepsReruns(t *testing.T) {
	for _, checked := range []bool{false, true} {
		t.Run(fmt.Sprintf("checked=%v", checked), func(t *testing.T) {
			e := canaryEnv(t, []string{"w1", "w2", "w1"}, config.Canary{MaxTokens: 8, CompareTokens: 4}, nil, func(c *config.Config) {
				// sim-1 serves first; the rerun chooses between sim-2 (diverges), which
				// the pool prefers when nothing else tells them apart, and sim-3 (agrees).
				c.Models[0].Replicas[1].Priority = 1
				c.Models[0].Replicas[2].Priority = 1
			})
			if checked {
				e.gw.CheckCanaries(context.Background())
				if c := e.canaryOf("sim-2"); c["state"] != "diverges" {
					t.Fatalf("sim-2: %v", c)
				}
			}
			const n = 4
			e.sims[0].ArmFault("status:500@accept", n)
			onDiverging := 0
			for i := range n {
				r := e.stream(testCtx(t), chatParams(fmt.Sprintf("rerun me %d", i), 3))
				if r.err != nil {
					t.Fatalf("request %d: %v", i, r.err)
				}
				onDiverging += len(e.simRequests(1, r.requestID))
			}
			switch {
			case checked && onDiverging != 0:
				t.Fatalf("%d reruns went to the diverging replica", onDiverging)
			case !checked && onDiverging == 0:
				t.Fatal("without a check the reruns never chose sim-2: this test shows nothing")
			}
		})
	}
}

// With exclude_from: all a diverging replica gets no work at all, the canary named as the
// reason.
func TestCanaryExcludeFromAll(t *testing.T) {
	e := canaryEnv(t, []string{"w1", "w1", "w2"}, config.Canary{ExcludeFrom: "all"}, nil, nil)
	e.gw.CheckCanaries(context.Background())
	st, reason := e.replicaState("sim-3")
	if st != "incompatible" || !strings.HasPrefix(reason, "canary: ") {
		t.Fatalf("sim-3: %s (%s)", st, reason)
	}
	for i := range 6 {
		if r := e.stream(testCtx(t), chatParams(fmt.Sprintf("q%d", i), 2)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if _, others := canaryProbes(e.sims[2]); others != 0 {
		t.Fatalf("the excluded replica served %d requests", others)
	}
	// It is still probed (once, then again as the outvoted one), so that it can be seen
	// to agree again.
	e.gw.CheckCanaries(context.Background())
	if probes, _ := canaryProbes(e.sims[2]); probes != 4 {
		t.Fatalf("the excluded replica was probed %d times in two checks, want 4", probes)
	}
}

// A replica that disagreed once (as batch-size effects make engines do) but agrees when
// asked again is not marked.
func TestCanaryForgivesOneDisagreement(t *testing.T) {
	e := canaryEnv(t, []string{"w1", "w1", "w1"}, config.Canary{MaxTokens: 8, CompareTokens: 8}, func(i int, c *sim.Config) {
		if i == 2 {
			c.DivergeFirst = 1
		}
	}, nil)
	e.gw.CheckCanaries(context.Background())
	for _, n := range []string{"sim-1", "sim-2", "sim-3"} {
		if c := e.canaryOf(n); c["state"] != "agrees" {
			t.Fatalf("%s: %v", n, c)
		}
	}
	if c := e.canaryOf("sim-3"); !strings.Contains(c["detail"].(string), "agreed when probed again") {
		t.Fatalf("sim-3: %v", c)
	}
	if probes, _ := canaryProbes(e.sims[2]); probes != 2 {
		t.Fatalf("sim-3 was probed %d times, want 2 (one retry)", probes)
	}
}

// Two replicas that answer differently have no majority: neither can be blamed, so both
// are kept from reruns between them, and neither from new work.
func TestCanaryTie(t *testing.T) {
	e := canaryEnv(t, []string{"w1", "w2"}, config.Canary{ExcludeFrom: "all"}, nil, nil)
	e.gw.CheckCanaries(context.Background())
	for _, n := range []string{"sim-1", "sim-2"} {
		c := e.canaryOf(n)
		if c["state"] != "diverges" || !strings.Contains(c["detail"].(string), "no majority") {
			t.Fatalf("%s: %v", n, c)
		}
		if st, _ := e.replicaState(n); st != "healthy" {
			t.Fatalf("%s is %s: a tie keeps no replica from new work", n, st)
		}
	}
}

// Replicas of different fingerprints are never compared: each is alone in its group.
func TestCanaryComparesWithinFingerprintGroups(t *testing.T) {
	e := canaryEnv(t, []string{"w1", "w2"}, config.Canary{}, func(i int, c *sim.Config) {
		c.Revision = fmt.Sprintf("r%d", i+1)
	}, nil)
	e.gw.CheckCanaries(context.Background())
	for _, n := range []string{"sim-1", "sim-2"} {
		if c := e.canaryOf(n); c["state"] != "unknown" || !strings.Contains(c["detail"].(string), "no other replica") {
			t.Fatalf("%s: %v", n, c)
		}
	}
}
