package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
)

// Config sets the size and the randomness of a run.
type Config struct {
	Requests    int    // logical requests to send (default 100)
	Concurrency int    // at most this many at once (default 8)
	Replicas    int    // simulated replicas (default 3)
	Seed        uint64 // the same seed gives the same fault plan
	// FaultRate is the share of requests that carry a fault (default 0.6).
	FaultRate float64
	// DecodePerToken slows the replicas so that faults land mid-stream (default 2ms).
	DecodePerToken time.Duration
	// Rate paces the requests (per second, default 150): without it, a pool that sheds
	// answers so fast that the rest of the plan is spent in the second it sheds.
	Rate float64
	// Fenced puts a fencegate agent (behind a fault proxy) in front of every replica, with
	// short leases, and Partitions cuts a random gateway↔agent link that many times during
	// the run (each for 300–700 ms): silent attempts are then fenced and rerun.
	Fenced     bool
	Partitions int
}

func (c *Config) defaults() {
	if c.Requests <= 0 {
		c.Requests = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Replicas <= 0 {
		c.Replicas = 3
	}
	if c.FaultRate == 0 {
		c.FaultRate = 0.6
	}
	if c.DecodePerToken == 0 {
		c.DecodePerToken = 2 * time.Millisecond
	}
	if c.Rate <= 0 {
		c.Rate = 150
	}
}

// Report is what a run saw.
type Report struct {
	Requests    int
	Completed   int
	Interrupted int
	Failed      int // an error before any output
	Reruns      int // requests served by more than one attempt
	ByFault     map[string]int
	FailCodes   map[string]int // error codes of the failed and interrupted requests
	Violations  []string
}

func (r Report) String() string {
	var faults []string
	for f, n := range r.ByFault {
		faults = append(faults, fmt.Sprintf("%s=%d", f, n))
	}
	sort.Strings(faults)
	var codes []string
	for c, n := range r.FailCodes {
		codes = append(codes, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(codes)
	return fmt.Sprintf("%d requests: %d completed (%d after a rerun), %d interrupted, %d failed before output; faults %s; error codes %s; %d violations",
		r.Requests, r.Completed, r.Reruns, r.Interrupted, r.Failed, strings.Join(faults, " "), strings.Join(codes, " "), len(r.Violations))
}

// actions and points the plan draws from (an action listed twice is drawn twice as
// often). Crashes are the harshest: they also break the other requests running on that
// replica and keep it out for a moment; an engine 429/503 keeps new work off the replica
// for a second.
var (
	actions = []string{"crash", "reset", "reset", "hang", "hang", "status:500", "status:500", "status:429", "status:503"}
	points  = []string{"accept", "prefill", "computed:0", "computed:2", "sent:0", "sent:1", "sent:3"}
)

// Run starts the replicas and a gateway, runs the plan, and checks every history.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	reps, err := startReplicas(cfg)
	if err != nil {
		return Report{}, err
	}
	defer reps.close()
	gcfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: reps.config}}}
	if cfg.Fenced {
		gcfg.Leases = config.Leases{TTL: config.Duration(600 * time.Millisecond), RenewEvery: config.Duration(100 * time.Millisecond),
			HeartbeatTimeout: config.Duration(250 * time.Millisecond), DriftMargin: config.Duration(200 * time.Millisecond)}
	}
	gcfg.Policy.IdleTimeout = config.Duration(300 * time.Millisecond)
	gcfg.Policy.FirstTokenTimeout = config.Duration(500 * time.Millisecond)
	gcfg.Health.DeadCooldown = config.Duration(100 * time.Millisecond)
	gcfg.Health.ProbeEvery = config.Duration(100 * time.Millisecond)
	big := 1000.0
	gcfg.Policy.RetryBudget.Burst = &big // the run checks histories, not the budget
	if err := gcfg.Validate(); err != nil {
		return Report{}, err
	}
	gw, err := gateway.New(ctx, gcfg, gateway.Options{})
	if err != nil {
		return Report{}, err
	}
	defer gw.Close()
	gw.Start()
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()

	plan := make([]request, cfg.Requests)
	for i := range plan {
		plan[i] = request{n: i, prompt: fmt.Sprintf("chaos request %d of seed %d", i, cfg.Seed), maxTokens: 6 + rng.IntN(10)}
		if rng.Float64() < cfg.FaultRate {
			plan[i].fault = fmt.Sprintf("%s@%s;on=sim-%d", actions[rng.IntN(len(actions))], points[rng.IntN(len(points))], 1+rng.IntN(cfg.Replicas))
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	partitionsDone := reps.partition(ctx, cfg, rng)
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	pace := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer pace.Stop()
	for i := range plan {
		<-pace.C
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			plan[i].seen = send(ctx, client, srv.URL, &plan[i])
		}()
	}
	wg.Wait()
	<-partitionsDone
	for _, s := range reps.sims {
		if err := s.WaitUp(ctx); err != nil {
			return Report{}, fmt.Errorf("replica %s did not come back: %w", s.Name(), err)
		}
	}
	c := checker{gateway: srv.URL, sims: reps.sims, agents: reps.agents, client: client, refs: map[string]string{}}
	return c.check(ctx, plan), nil
}
