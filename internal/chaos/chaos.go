package chaos

import (
	"context"
	"fmt"
	"log/slog"
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
	// short leases. Partitions cuts a random gateway↔replica link that many times during
	// the run (each for 1–1.5 s): in fenced mode the link to an agent, whose silent
	// attempts are then fenced and rerun; in direct mode the link to an engine (through a
	// fault proxy), whose silent attempts time out and must not be rerun.
	Fenced     bool
	Partitions int
	// Logger receives the gateway's and the agents' logs (default: discarded; the report
	// says what matters).
	Logger *slog.Logger
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Report is what a run saw.
type Report struct {
	Requests    int
	Completed   int
	Interrupted int
	Failed      int // an error before any output
	Reruns      int // requests served by more than one attempt
	Left        int // the client left part-way on purpose
	Stalled     int // the client stopped reading on purpose
	ByFault     map[string]int
	// ByKind counts requests and violating requests by fault, client behaviour and
	// request shape (a request counts under each of its labels).
	ByKind map[string]*KindStats
	// ByRule counts violations by the rule they break.
	ByRule     map[string]int
	FailCodes  map[string]int // error codes of the failed and interrupted requests
	Violations []string
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
	var rules []string
	for _, rule := range sortedKeys(r.ByRule) {
		rules = append(rules, fmt.Sprintf("%s=%d", rule, r.ByRule[rule]))
	}
	return fmt.Sprintf("%d requests: %d completed (%d after a rerun), %d interrupted, %d failed before output, %d left, %d stalled; faults %s; error codes %s; %d violations %s",
		r.Requests, r.Completed, r.Reruns, r.Interrupted, r.Failed, r.Left, r.Stalled, strings.Join(faults, " "), strings.Join(codes, " "), len(r.Violations), strings.Join(rules, " "))
}

// Kinds lists, one per line, every label with its requests and violating requests.
func (r Report) Kinds() string {
	var names []string
	for k := range r.ByKind {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		ks := r.ByKind[k]
		fmt.Fprintf(&b, "  %-16s %4d requests, %3d violating", k, ks.Requests, ks.Violating)
		if len(ks.Rules) > 0 {
			b.WriteString(":")
			for _, rule := range sortedKeys(ks.Rules) {
				fmt.Fprintf(&b, " %s=%d", rule, ks.Rules[rule])
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Short timings keep a run fast: the gateway gives up on a silent attempt within half a
// second, sends keepalives before a late first token, and treats a client that accepts
// nothing for clientWriteTimeout as gone.
const (
	idleTimeout        = 300 * time.Millisecond
	firstTokenTimeout  = 500 * time.Millisecond
	keepalive          = 150 * time.Millisecond
	clientWriteTimeout = 600 * time.Millisecond
	// stallWait is how long a stalled client waits for its request to end: the time its
	// answer takes to fill the buffers, then the write timeout and its quarter of slack,
	// with a wide margin.
	stallWait = 8 * time.Second
	// clientTimeout bounds every other client: a request still unanswered then was held up
	// by something (a stalled neighbour, a hung gateway).
	clientTimeout = 20 * time.Second
	// closeWait bounds the gateway's shutdown after the run: its handlers must all return.
	closeWait = 10 * time.Second
)

// Run starts the replicas and a gateway, runs the plan, and checks every history.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	reps, err := startReplicas(cfg, rng)
	if err != nil {
		return Report{}, err
	}
	defer reps.close()
	gcfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: reps.config}}}
	if cfg.Fenced {
		gcfg.Leases = config.Leases{TTL: config.Duration(600 * time.Millisecond), RenewEvery: config.Duration(100 * time.Millisecond),
			HeartbeatTimeout: config.Duration(250 * time.Millisecond), DriftMargin: config.Duration(200 * time.Millisecond)}
	}
	gcfg.Policy.IdleTimeout = config.Duration(idleTimeout)
	gcfg.Policy.FirstTokenTimeout = config.Duration(firstTokenTimeout)
	gcfg.Policy.Keepalive = config.Duration(keepalive)
	gcfg.Policy.ClientWriteTimeout = config.Duration(clientWriteTimeout)
	gcfg.Health.DeadCooldown = config.Duration(100 * time.Millisecond)
	gcfg.Health.ProbeEvery = config.Duration(100 * time.Millisecond)
	big := 1000.0
	gcfg.Policy.RetryBudget.Burst = &big // the run checks histories, not the budget
	if err := gcfg.Validate(); err != nil {
		return Report{}, err
	}
	gw, err := gateway.New(ctx, gcfg, gateway.Options{Logger: cfg.Logger})
	if err != nil {
		return Report{}, err
	}
	defer gw.Close()
	gw.Start()
	srv := httptest.NewUnstartedServer(gw.Handler())
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()

	plan := drawPlan(cfg, rng)
	cl := &clients{gateway: srv.URL, client: &http.Client{Timeout: clientTimeout}, sims: reps.sims, stallWait: stallWait}
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
			cl.run(ctx, &plan[i])
		}()
	}
	wg.Wait()
	<-partitionsDone
	for _, s := range reps.sims {
		if err := s.WaitUp(ctx); err != nil {
			return Report{}, fmt.Errorf("replica %s did not come back: %w", s.Name(), err)
		}
	}
	c := checker{clients: cl, sims: reps.sims, agents: reps.agents, fenced: cfg.Fenced, toolIDs: reps.toolIDs,
		intervals: reps.intervals, answers: map[string]answer{}}
	rep := c.check(ctx, plan)
	if !closeWithin(srv, closeWait) {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%s: the gateway's handlers were still running %s after every client was done", rRun, closeWait))
		rep.ByRule[rRun]++
	}
	return rep, nil
}

// closeWithin closes the gateway's HTTP server, which waits for its handlers, and reports
// whether that took less than d. A handler that never returns is left behind.
func closeWithin(srv *httptest.Server, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		srv.Close()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
