package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
)

// Three of four replicas crash under steady load. Reruns stay within the retry budget, the
// survivor never has more than its limit in flight, excess requests get 429/503 quickly, and
// every request ends (none waits without bound).
func TestMassFailureUnderLoad(t *testing.T) {
	const (
		clients        = 12
		perClient      = 12
		maxOutstanding = 3
		burst          = 4.0
		ratio          = 0.1
	)
	perSecond := 1.0
	r, b := ratio, burst
	e := newEnv(t, envOptions{
		replicas: 4,
		sim:      func(i int, c *sim.Config) { c.DecodePerToken = 3 * time.Millisecond; c.MaxRunning = 2 },
		config: func(c *config.Config) {
			c.Models[0].MaxOutstanding = maxOutstanding
			c.Models[0].Queue.MaxLen = -1 // refused at once, as this test expects
			c.Policy.RetryBudget = config.RetryBudget{Ratio: &r, MinPerSecond: &perSecond, Burst: &b}
		},
	})
	var finished atomic.Int64
	crashAt := int64(clients * 2)
	var crashOnce sync.Once
	type result struct {
		err     error
		latency time.Duration
	}
	results := make(chan result, clients*perClient)
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				t0 := time.Now()
				res := e.stream(ctx, chatParams(fmt.Sprintf("client %d request %d", c, i), 20))
				cancel()
				results <- result{res.err, time.Since(t0)}
				if finished.Add(1) == crashAt {
					crashOnce.Do(func() {
						for _, s := range e.sims[:3] {
							s.Crash()
						}
					})
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(results)

	codes := map[string]int{}
	var slowest time.Duration
	for res := range results {
		slowest = max(slowest, res.latency)
		if res.err == nil {
			codes["ok"]++
			continue
		}
		var apiErr *openai.Error
		switch {
		case errors.As(res.err, &apiErr):
			codes[apiErr.Code]++
		case errors.Is(res.err, context.DeadlineExceeded):
			t.Fatalf("a request waited 20s: %v", res.err)
		default:
			codes["stream:"+interruptionCode(res.err)]++
		}
	}
	t.Logf("outcomes %v; slowest %v; elapsed %v", codes, slowest, elapsed)
	for code := range codes {
		switch code {
		case "ok", "pool_overloaded", "no_healthy_replica", "retry_budget_exhausted", "upstream_unavailable", "stream:upstream_decode_interrupted":
		default:
			t.Errorf("unexpected outcome %q", code)
		}
	}
	if codes["ok"] == 0 {
		t.Fatal("nothing completed")
	}

	// Reruns, from the replicas' own records: every request id seen on more than one
	// replica was rerun (dial failures never reach a replica, so they are not counted).
	seen := map[string]int{}
	for _, s := range e.sims {
		for _, rec := range s.Records() {
			seen[rec.RequestID]++
		}
	}
	reruns := 0
	for _, n := range seen {
		reruns += n - 1
	}
	budget := burst + ratio*float64(clients*perClient) + perSecond*elapsed.Seconds()
	if float64(reruns) > budget {
		t.Fatalf("%d reruns, budget allows at most %.1f", reruns, budget)
	}

	// The survivor never had more than maxOutstanding requests of this gateway at once: by
	// the gateway's count, and by the engine's own records, where a request's handler may
	// outlive the gateway's reading of its [DONE] by a moment (hence one more).
	var ready struct {
		Pools []struct {
			Replicas []struct {
				Name string `json:"name"`
				Peak int    `json:"peak_outstanding"`
			} `json:"replicas"`
		} `json:"models"`
	}
	resp, err := http.Get(e.admin.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	for _, rep := range ready.Pools[0].Replicas {
		if rep.Peak > maxOutstanding || (rep.Name == "sim-4" && rep.Peak == 0) {
			t.Fatalf("replica %s peak outstanding %d, limit %d", rep.Name, rep.Peak, maxOutstanding)
		}
	}
	if peak := peakConcurrency(e.sims[3].Records()); peak > maxOutstanding+1 {
		t.Fatalf("survivor engine peak concurrency %d > limit %d", peak, maxOutstanding)
	}
}

func interruptionCode(err error) string {
	ev, ok := errorEvent(err)
	if !ok {
		return err.Error()
	}
	code, _ := ev["code"].(string)
	return code
}

// peakConcurrency is the largest number of records whose [Started, Ended] overlap.
func peakConcurrency(recs []sim.Record) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range recs {
		end := r.Ended
		if end.IsZero() {
			end = time.Now()
		}
		edges = append(edges, edge{r.Started, 1}, edge{end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
