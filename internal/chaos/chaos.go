package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
)

// Config sets the size and the randomness of a run.
type Config struct {
	Requests    int // logical requests to send (default 100)
	Concurrency int // at most this many at once (default 8)
	Replicas    int // simulated generating replicas (default 3)
	// EmbedReplicas serve the embeddings requests, as a pool of their own (default 2).
	EmbedReplicas int
	Seed          uint64 // the same seed gives the same fault plan
	// FaultRate is the share of requests that carry a fault (default 0.6).
	FaultRate float64
	// EngineTools is the share of the Responses requests (those that neither continue one
	// nor call a function) that let the engine run a tool itself (default 0.25).
	EngineTools float64
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
	// MaxOutstanding bounds the gateway's requests in flight on each generating replica
	// (0: none): with more requests in flight than the replicas take, the rest wait in the
	// pool's queue, and the run checks the contract while they do.
	MaxOutstanding int
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
	if c.EmbedReplicas <= 0 {
		c.EmbedReplicas = 2
	}
	if c.FaultRate == 0 {
		c.FaultRate = 0.6
	}
	if c.EngineTools == 0 {
		c.EngineTools = shareEngineTool
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
	ByRule map[string]int
	// ByAPI counts what became of the requests of each API, streamed and whole apart
	// ("messages/stream", "responses/whole", …).
	ByAPI      map[string]*APIStats
	FailCodes  map[string]int // error codes of the failed and interrupted requests
	Violations []string
	// Found holds each violation again, with what tells one kind from another.
	Found []Finding
	// Continuations counts the Responses requests that continued an earlier response.
	Continuations ContinuationStats
}

// ContinuationStats is what became of the requests that continued an earlier response of
// the run (previous_response_id).
type ContinuationStats struct {
	Planned int // drawn as continuations
	Skipped int // the response they were to continue never completed: sent as fresh requests
	// Of those sent with previous_response_id: completed (on the replica that stored the
	// response), interrupted after output, told previous_response_unavailable, told by the
	// replica that it no longer has the response, or failed otherwise.
	Completed, Interrupted, Unavailable, NotFound, OtherFailure int
}

func (c ContinuationStats) String() string {
	return fmt.Sprintf("%d planned, %d skipped (nothing to continue); of the rest %d completed, %d interrupted, %d previous_response_unavailable, %d not found by their replica, %d other failures",
		c.Planned, c.Skipped, c.Completed, c.Interrupted, c.Unavailable, c.NotFound, c.OtherFailure)
}

// countContinuation counts req, which ended as outcome, if it continues a response.
func (r *Report) countContinuation(req *request, outcome string) {
	if req.continues < 0 {
		return
	}
	c := &r.Continuations
	c.Planned++
	switch code := errorCode(req.seen); {
	case req.prevID == "":
		c.Skipped++
	case outcome == "completed" || outcome == "rerun-completed":
		c.Completed++
	case outcome == "interrupted":
		c.Interrupted++
	case code == "previous_response_unavailable":
		c.Unavailable++
	case req.seen.status == http.StatusNotFound:
		c.NotFound++
	default:
		c.OtherFailure++
	}
}

// Finding is one violation of one request's history.
type Finding struct {
	Request    int    // its index in the plan
	Describe   string // the request, its shape and fault, and its request id
	API        string // as ByAPI names it
	Outcome    string // what the client saw: completed, rerun-completed, interrupted, failed, left, stalled
	Rule, Text string
	Attempts   int // attempts the journal has for it
	// ContinuesStreamRerun: the request continues a streamed response whose own request
	// ran more than one attempt.
	ContinuesStreamRerun bool
}

func (f Finding) String() string {
	return fmt.Sprintf("%s, %s: %s: %s", f.Describe, f.Outcome, f.Rule, f.Text)
}

// apiName is the name ByAPI counts req under.
func apiName(req *request) string {
	if !req.stream {
		return req.endpoint + "/whole"
	}
	return req.endpoint + "/stream"
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

// APIStats is what became of the requests of one API.
type APIStats struct {
	Requests, Completed, Reruns, Interrupted, Failed, Left, Stalled, Violating int
	// Faults counts its requests per fault, Codes the error codes their clients got.
	Faults, Codes map[string]int
}

// countAPI counts r, which ended as outcome, under its API.
func (r *Report) countAPI(req *request, outcome string, violating bool) {
	name := apiName(req)
	a := r.ByAPI[name]
	if a == nil {
		a = &APIStats{Faults: map[string]int{}, Codes: map[string]int{}}
		r.ByAPI[name] = a
	}
	a.Requests++
	switch outcome {
	case "completed":
		a.Completed++
	case "rerun-completed":
		a.Completed++
		a.Reruns++
	case "interrupted":
		a.Interrupted++
	case "failed":
		a.Failed++
	case "left":
		a.Left++
	case "stalled":
		a.Stalled++
	}
	if violating {
		a.Violating++
	}
	if req.faultKind != "" {
		a.Faults[req.faultKind]++
	}
	if code := errorCode(req.seen); code != "" {
		a.Codes[code]++
	}
}

// APIs lists, one per line, what became of each API's requests: their endings, the
// faults they carried and the error codes their clients got.
func (r Report) APIs() string {
	var names []string
	for k := range r.ByAPI {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		a := r.ByAPI[k]
		fmt.Fprintf(&b, "  %-22s %4d requests: %d completed (%d after a rerun), %d interrupted, %d failed before output, %d left, %d stalled; %d violating\n",
			k, a.Requests, a.Completed, a.Reruns, a.Interrupted, a.Failed, a.Left, a.Stalled, a.Violating)
		if len(a.Faults) > 0 {
			b.WriteString("      faults:")
			writeCounts(&b, a.Faults)
			b.WriteString("\n")
		}
		if len(a.Codes) > 0 {
			b.WriteString("      codes:")
			writeCounts(&b, a.Codes)
			b.WriteString("\n")
		}
	}
	return b.String()
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
		if len(ks.Endings) > 0 {
			b.WriteString(" (")
			for i, e := range sortedKeys(ks.Endings) {
				if i > 0 {
					b.WriteString(" ")
				}
				fmt.Fprintf(&b, "%s=%d", e, ks.Endings[e])
			}
			b.WriteString(")")
		}
		if len(ks.Rules) > 0 {
			b.WriteString(":")
			writeCounts(&b, ks.Rules)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeCounts writes " name=count" for each of m's names, in order.
func writeCounts(b *strings.Builder, m map[string]int) {
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(b, " %s=%d", k, m[k])
	}
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
	// nonStreamTimeout bounds a whole answer, which is silent until it is done: the longest
	// (a tool call of toolMaxTokens) takes a fraction of it.
	nonStreamTimeout = time.Second
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
	gcfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: reps.config, MaxOutstanding: cfg.MaxOutstanding},
		{Name: embedModel, Replicas: reps.embedConfig}}}
	setChaosTimings(gcfg, cfg.Fenced)
	if err := gcfg.Validate(); err != nil {
		return Report{}, err
	}
	hb := newHeartbeats(cfg.Logger.Handler())
	gw, err := gateway.New(ctx, gcfg, gateway.Options{Logger: slog.New(hb)})
	if err != nil {
		return Report{}, err
	}
	defer gw.Close()
	gw.Start()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Report{}, fmt.Errorf("chaos: the gateway's listener: %w", err)
	}
	srv := serveGateway(ln, gw.Handler())

	plan := drawPlan(cfg, rng)
	cl := &clients{plan: plan, gateway: srv.url, client: &http.Client{Timeout: clientTimeout}, sims: reps.sims, stallWait: stallWait}
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
	c := checker{clients: cl, sims: reps.sims, agents: reps.agents, fenced: cfg.Fenced, toolIDs: reps.toolIDs, tools: reps.tools,
		intervals: reps.intervals, answers: map[string]answer{}, cuts: hb.merged(reps.cuts)}
	rep := c.check(ctx, plan)
	if !srv.closeWithin(closeWait) {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%s: the gateway's handlers were still running %s after every client was done", rRun, closeWait))
		rep.ByRule[rRun]++
	}
	return rep, nil
}

// heartbeats passes the gateway's log records on to its Handler and keeps, from them, when
// the gateway lost each agent's heartbeat and when it came back: the gateway then keeps
// new work off that replica, which a partition explains, but so can renewals that took
// too long on a loaded machine (the run's leases are short), which nothing else records.
type heartbeats struct {
	slog.Handler
	lost *lostHeartbeats // shared by the handlers derived from this one
}

type lostHeartbeats struct {
	mu    sync.Mutex
	spans map[string][]window // by replica; an end of zero: not back yet
}

func newHeartbeats(h slog.Handler) *heartbeats {
	return &heartbeats{Handler: h, lost: &lostHeartbeats{spans: map[string][]window{}}}
}

// The gateway's words for losing and regaining an agent's heartbeat.
const (
	logHeartbeatFailed = "agent heartbeat failed"
	logHeartbeatBack   = "agent heartbeat is back"
)

// Enabled lets Info and above through whatever the wrapped handler wants, so that the
// heartbeat records reach Handle.
func (h *heartbeats) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo || h.Handler.Enabled(ctx, level)
}

func (h *heartbeats) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == logHeartbeatFailed || r.Message == logHeartbeatBack {
		replica := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "replica" {
				replica = a.Value.String()
			}
			return replica == ""
		})
		l := h.lost
		l.mu.Lock()
		spans := l.spans[replica]
		switch {
		case r.Message == logHeartbeatFailed:
			l.spans[replica] = append(spans, window{start: r.Time})
		case len(spans) > 0 && spans[len(spans)-1].end.IsZero():
			spans[len(spans)-1].end = r.Time
		}
		l.mu.Unlock()
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *heartbeats) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &heartbeats{Handler: h.Handler.WithAttrs(attrs), lost: h.lost}
}

func (h *heartbeats) WithGroup(name string) slog.Handler {
	return &heartbeats{Handler: h.Handler.WithGroup(name), lost: h.lost}
}

// merged is cuts with the lost heartbeats added as cuts of their replica's link (one not
// back by the end of the run lasts until then).
func (h *heartbeats) merged(cuts map[string][]window) map[string][]window {
	l := h.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]window{}
	for name, ws := range cuts {
		out[name] = append(out[name], ws...)
	}
	for name, ws := range l.spans {
		for _, w := range ws {
			if w.end.IsZero() {
				w.end = time.Now()
			}
			out[name] = append(out[name], w)
		}
	}
	return out
}

// setChaosTimings gives a gateway the short timings of a chaos run, so that a fault shows
// within a second, and a retry budget no run exhausts: a run fails requests on purpose,
// and checks histories, not the budget.
func setChaosTimings(gcfg *config.Config, fenced bool) {
	if fenced {
		gcfg.Leases = config.Leases{TTL: config.Duration(600 * time.Millisecond), RenewEvery: config.Duration(100 * time.Millisecond),
			HeartbeatTimeout: config.Duration(250 * time.Millisecond), DriftMargin: config.Duration(200 * time.Millisecond)}
	}
	gcfg.Policy.IdleTimeout = config.Duration(idleTimeout)
	gcfg.Policy.FirstTokenTimeout = config.Duration(firstTokenTimeout)
	gcfg.Policy.Keepalive = config.Duration(keepalive)
	gcfg.Policy.ClientWriteTimeout = config.Duration(clientWriteTimeout)
	gcfg.Policy.NonStreamTimeout = config.Duration(nonStreamTimeout)
	gcfg.Health.DeadCooldown = config.Duration(100 * time.Millisecond)
	gcfg.Health.ProbeEvery = config.Duration(100 * time.Millisecond)
	big := 1000.0
	gcfg.Policy.RetryBudget.Burst = &big
}
