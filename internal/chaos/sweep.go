package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// A sweep runs one request per fault point × action against a gateway in front of
// simulated replicas, one after another, and judges each from the wire and the replicas'
// records (judgeWire). It is deterministic: the cases, their order, their requests and
// their faults follow from the configuration alone, and every wait is a configured bound.
// The gateway is fencegate started in-process, or any gateway at a URL (Target).

// Actions of a sweep. The engine's faults travel in X-Sim-Fault (restricted to the first
// replica, which every case aims its fault at); the client's behaviours are the sweep
// client's own; a partition black-holes a replica's link in the fault proxy in front of it.
var (
	replicaActions = []string{"crash", "reset", "hang", "error", "status:429", "status:500", "status:503"}
	clientActions  = []string{"stall", "leave"}
	// SweepActions are every action, in the order of the summary table's columns.
	SweepActions = append(append(append([]string(nil), replicaActions...), clientActions...), "partition")
)

// sweepCase is one request of a sweep: an action at a point of the token cycle, or at
// the point right after the engine ran a tool of its own (toolPoint).
type sweepCase struct {
	n      int    // its number in the sweep, from 1
	point  string // accept, prefill, computed:K, sent:K (K counts from 1), tool:1
	action string
	// whole: the request asks for a whole answer rather than a stream (toolPoint only).
	whole bool
}

func (c sweepCase) String() string { return c.action + "@" + c.row() }

// row is the case's row of the summary table: its point, and "whole" for a whole answer.
func (c sweepCase) row() string {
	if c.whole {
		return c.point + " whole"
	}
	return c.point
}

// engineTool reports whether the case's request lets the engine run a tool itself.
func (c sweepCase) engineTool() bool { return c.point == toolPoint }

// toolPoint is the point right after the engine ran a tool of its own: the case's request
// is a Responses request with an engine-run mcp tool (engineToolDecl), which every replica
// runs on the sweep's counting tool server before it answers, and the fault fires once
// the tool's call returned (the sim's tool:1). Its rows are the streamed request and the
// whole one (toolRows). A client that stops reading has no row there: a Responses answer
// stops at its natural length (the API takes no ignore_eos), too short to fill a buffer.
const toolPoint = "tool:1"

// toolRows are the summary table's rows of toolPoint.
var toolRows = []string{toolPoint, toolPoint + " whole"}

// sweepPoints are the points of an answer of n tokens, in the order the token cycle
// reaches them: accept, prefill, then for each token computed:K and sent:K.
func sweepPoints(n int) []string {
	p := []string{"accept", "prefill"}
	for k := 1; k <= n; k++ {
		p = append(p, fmt.Sprintf("computed:%d", k), fmt.Sprintf("sent:%d", k))
	}
	return p
}

// pointToken splits computed:K, sent:K (K from 1) and tool:N; other points give K 0.
func pointToken(point string) (kind string, k int) {
	kind, ks, ok := strings.Cut(point, ":")
	if !ok {
		return point, 0
	}
	k, _ = strconv.Atoi(ks)
	return kind, k
}

// simPoint is the point in the sim's grammar, whose token indexes count from 0: the
// sweep's computed:K (K tokens computed) is the sim's computed:K-1.
func simPoint(point string) string {
	kind, k := pointToken(point)
	if k == 0 || kind == "tool" {
		return point // the sim's tool:N counts from 1 as the sweep's does
	}
	return fmt.Sprintf("%s:%d", kind, k-1)
}

// isReplicaAction reports whether action is an engine fault sent in X-Sim-Fault.
func isReplicaAction(action string) bool { return slices.Contains(replicaActions, action) }

// Faulted is the replica every engine fault of a sweep is aimed at: a case whose request
// the gateway sent elsewhere first is run again (see CaseResult.Tries).
const Faulted = "sim-1"

// simFault is the X-Sim-Fault header of case c ("" for none). An engine fault fires on
// the faulted replica only. A client that leaves slows its replica twentyfold from the
// point on, so that a replica that is not told keeps decoding long enough to be seen; a
// client that stops reading lets its replica flood it from the point on, so that the
// answer fills every buffer on the way while the replica still runs.
func simFault(c sweepCase) string {
	switch {
	case isReplicaAction(c.action):
		return fmt.Sprintf("%s@%s;on=%s", c.action, simPoint(c.point), Faulted)
	case c.action == "leave":
		return "slow:x20@" + simPoint(c.point)
	case c.action == "stall":
		return "slow:x0.001@" + simPoint(c.point)
	}
	return ""
}

// CaseResult is what one case of a sweep found.
type CaseResult struct {
	N             int
	Point, Action string
	// Whole: the request asked for a whole answer (a case at toolPoint).
	Whole bool
	Fault string // X-Sim-Fault
	// Tries counts the runs of the case: one more for each whose fault never came into
	// play (the gateway sent the request to another replica first, or the point was never
	// reached); Missed says the last one did not either.
	Tries  int
	Missed bool
	// Ending is what became of the request when it kept the contract (complete, rerun,
	// interrupted, error, left, stalled); Violations lists the rules it broke.
	Ending     string
	Tokens     int
	Violations []violation
	Traces     []string // the trace written for each violation
	// ToolCalls counts the calls of the engine-run tool that the sweep's tool server
	// received during the case's last try (0 for a request that declared no such tool).
	ToolCalls int
}

// Row is the case's row of the summary table: its point, and "whole" for a whole answer.
func (c CaseResult) Row() string { return sweepCase{point: c.Point, whole: c.Whole}.row() }

// Cell is the case's entry in the summary table: its ending, "missed", or the rules it
// broke in capitals.
func (c CaseResult) Cell() string {
	if len(c.Violations) > 0 {
		var rules []string
		for _, v := range c.Violations {
			if r := strings.ToUpper(v.rule); !slices.Contains(rules, r) {
				rules = append(rules, r)
			}
		}
		return strings.Join(rules, "+")
	}
	if c.Missed {
		return "missed"
	}
	return c.Ending
}

// SweepReport is a sweep's findings, case by case.
type SweepReport struct {
	Target  string
	Points  []string // the table's rows, in order (CaseResult.Row)
	Actions []string
	Cases   []CaseResult
}

// Violating counts the cases that broke a rule.
func (r SweepReport) Violating() int {
	n := 0
	for _, c := range r.Cases {
		if len(c.Violations) > 0 {
			n++
		}
	}
	return n
}

// Table is the summary: a row per point, a column per action, each cell a case's Cell.
// Points or actions without a case are left out.
func (r SweepReport) Table() string {
	cells := map[[2]string]string{}
	var points, actions []string
	for _, c := range r.Cases {
		cells[[2]string{c.Row(), c.Action}] = c.Cell()
	}
	for _, p := range r.Points {
		for _, c := range r.Cases {
			if c.Row() == p {
				points = append(points, p)
				break
			}
		}
	}
	for _, a := range r.Actions {
		for _, c := range r.Cases {
			if c.Action == a {
				actions = append(actions, a)
				break
			}
		}
	}
	width := map[string]int{}
	for _, a := range actions {
		width[a] = len(a)
		for _, p := range points {
			width[a] = max(width[a], len(cells[[2]string{p, a}]))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s", "point")
	for _, a := range actions {
		fmt.Fprintf(&b, " %-*s", width[a], a)
	}
	b.WriteString("\n")
	for _, p := range points {
		fmt.Fprintf(&b, "%-12s", p)
		for _, a := range actions {
			cell, ok := cells[[2]string{p, a}]
			if !ok {
				cell = "-"
			}
			fmt.Fprintf(&b, " %-*s", width[a], cell)
		}
		b.WriteString("\n")
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// Counts tallies the cases by ending and the violations by rule (a case that broke two
// rules counts under both).
func (r SweepReport) Counts() (endings, rules map[string]int) {
	endings, rules = map[string]int{}, map[string]int{}
	for _, c := range r.Cases {
		switch {
		case len(c.Violations) > 0:
			endings["violating"]++
		case c.Missed:
			endings["missed"]++
		default:
			endings[c.Ending]++
		}
		seen := map[string]bool{}
		for _, v := range c.Violations {
			if !seen[v.rule] {
				rules[v.rule]++
				seen[v.rule] = true
			}
		}
	}
	return endings, rules
}

// Summary is one line: the cases, their endings and the violations by rule.
func (r SweepReport) Summary() string {
	endings, rules := r.Counts()
	var e, v []string
	for _, k := range sortedKeys(endings) {
		e = append(e, fmt.Sprintf("%s=%d", k, endings[k]))
	}
	for _, k := range sortedKeys(rules) {
		v = append(v, fmt.Sprintf("%s=%d", k, rules[k]))
	}
	s := fmt.Sprintf("%d cases: %s; %d violating", len(r.Cases), strings.Join(e, " "), r.Violating())
	if len(v) > 0 {
		s += " (" + strings.Join(v, " ") + ")"
	}
	return s
}

// SweepConfig sets up a sweep, or a seeded sample of its cases.
type SweepConfig struct {
	// Target is the gateway's base URL; empty starts fencegate in-process (direct mode,
	// or fenced with Fenced) in front of the replicas.
	Target string
	// Fenced puts a fencegate agent in front of every replica (behind its fault proxy);
	// a partition then cuts the gateway↔agent link, and the in-process gateway uses the
	// agents.
	Fenced bool
	// Replicas is the number of simulated replicas (default 2); the first is Faulted.
	Replicas int
	// Tokens is N, the length of every answer (default 8): the points are accept, prefill,
	// computed:K and sent:K for K in 1..N.
	Tokens int
	// API is "chat" (default) or "completions": the endpoint every request streams from.
	API string
	// Actions and Points restrict the sweep (default: every point, toolPoint included,
	// and every action but partition, which is added in fenced mode).
	Actions, Points []string
	// ToolActions are the actions of toolPoint's rows, each run on a streamed and on a
	// whole request (default: those of Actions but stall).
	ToolActions []string
	// Sample, when above 0, runs that many cases drawn from the sweep with Seed instead of
	// every case once.
	Sample int
	Seed   uint64
	// Ports, when above 0, is the first of the fixed ports the sweep listens on: replica i
	// (from 0) at Ports+i, its agent at Ports+10+i, its fault proxy at Ports+20+i, an
	// in-process gateway at Ports+30. 0 takes free ports.
	Ports int
	// DecodePerToken paces the replicas (default 10ms); StallTokens is the length of the
	// answer a stalling client asks for (default 30000), enough to fill the buffers
	// between a replica and a client that stopped reading.
	DecodePerToken time.Duration
	StallTokens    int
	// ClientTimeout bounds one response (default 15s). LeaveWait is how long the
	// replicas have to stop after the client left (default 1s), StallWait after it stopped
	// reading (default 5s), EndWait after the response ended (default 3s).
	ClientTimeout, LeaveWait, StallWait, EndWait time.Duration
	// Traces, when set, is the directory each violation's trace is written to.
	Traces string
	// Prepare is called once the replicas listen, with what the target's configuration
	// needs, for a foreign Target: it prints the replicas' URLs, or writes a configuration
	// and (re)starts the target. ReadyTimeout bounds the wait for the target to answer
	// afterwards (default 60s).
	Prepare      func(ctx context.Context, env TargetEnv) error
	ReadyTimeout time.Duration
	// Logger receives the in-process gateway's and agents' logs (default: discarded);
	// Progress a line per case (default: none).
	Logger   *slog.Logger
	Progress io.Writer
}

func (c *SweepConfig) defaults() error {
	if c.Replicas <= 0 {
		c.Replicas = 2
	}
	if c.Replicas > 10 {
		return fmt.Errorf("at most 10 replicas, not %d", c.Replicas)
	}
	if c.Tokens <= 0 {
		c.Tokens = 8
	}
	if c.API == "" {
		c.API = "chat"
	}
	if c.API != "chat" && c.API != "completions" {
		return fmt.Errorf("API %q: chat or completions", c.API)
	}
	if c.DecodePerToken == 0 {
		c.DecodePerToken = 10 * time.Millisecond
	}
	if c.StallTokens <= 0 {
		c.StallTokens = 30000
	}
	for _, d := range []struct {
		p   *time.Duration
		def time.Duration
	}{{&c.ClientTimeout, 15 * time.Second}, {&c.LeaveWait, time.Second}, {&c.StallWait, 5 * time.Second},
		{&c.EndWait, 3 * time.Second}, {&c.ReadyTimeout, time.Minute}} {
		if *d.p <= 0 {
			*d.p = d.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if len(c.Actions) == 0 {
		c.Actions = append(append([]string(nil), replicaActions...), clientActions...)
		if c.Fenced {
			c.Actions = append(c.Actions, "partition")
		}
	}
	for _, a := range c.Actions {
		if !slices.Contains(SweepActions, a) {
			return fmt.Errorf("unknown action %q (want one of %s)", a, strings.Join(SweepActions, ", "))
		}
	}
	if len(c.ToolActions) == 0 {
		for _, a := range c.Actions {
			if a != "stall" {
				c.ToolActions = append(c.ToolActions, a)
			}
		}
	}
	for _, a := range c.ToolActions {
		if !slices.Contains(SweepActions, a) || a == "stall" {
			return fmt.Errorf("unknown action %q at %s (want one of %s but stall)", a, toolPoint, strings.Join(SweepActions, ", "))
		}
	}
	all := append(sweepPoints(c.Tokens), toolPoint)
	if len(c.Points) == 0 {
		c.Points = all
	}
	for _, p := range c.Points {
		if !slices.Contains(all, p) {
			return fmt.Errorf("unknown point %q for %d tokens (want accept, prefill, computed:K or sent:K with K in 1..%d, or %s)", p, c.Tokens, c.Tokens, toolPoint)
		}
	}
	return nil
}

// cases lists the sweep's cases: every point (in the token cycle's order) × every action,
// then toolPoint's streamed and whole requests × every tool action, or Sample of them
// drawn with Seed.
func (c *SweepConfig) cases() []sweepCase {
	var all []sweepCase
	for _, p := range sweepPoints(c.Tokens) {
		if !slices.Contains(c.Points, p) {
			continue
		}
		for _, a := range SweepActions {
			if slices.Contains(c.Actions, a) {
				all = append(all, sweepCase{point: p, action: a})
			}
		}
	}
	if slices.Contains(c.Points, toolPoint) {
		for _, whole := range []bool{false, true} {
			for _, a := range SweepActions {
				if slices.Contains(c.ToolActions, a) {
					all = append(all, sweepCase{point: toolPoint, action: a, whole: whole})
				}
			}
		}
	}
	if c.Sample > 0 {
		rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
		drawn := make([]sweepCase, c.Sample)
		for i := range drawn {
			drawn[i] = all[rng.IntN(len(all))]
		}
		all = drawn
	}
	for i := range all {
		all[i].n = i + 1
	}
	return all
}

// RunSweep starts the replicas (and the in-process gateway, or prepares the target), runs
// every case and returns what each found.
func RunSweep(ctx context.Context, cfg SweepConfig) (SweepReport, error) {
	if err := cfg.defaults(); err != nil {
		return SweepReport{}, err
	}
	rep := SweepReport{Target: cfg.Target, Points: append(sweepPoints(cfg.Tokens), toolRows...), Actions: SweepActions}
	reps, err := startSweepReplicas(cfg)
	if err != nil {
		return rep, err
	}
	defer reps.close()
	target := cfg.Target
	if target == "" {
		gw, err := startGateway(ctx, cfg, reps)
		if err != nil {
			return rep, err
		}
		defer gw.close()
		target = gw.url
		rep.Target = "fencegate (in-process, direct mode)"
		if cfg.Fenced {
			rep.Target = "fencegate (in-process, fenced mode)"
		}
	} else if cfg.Prepare != nil {
		if err := cfg.Prepare(ctx, reps.env(cfg, target)); err != nil {
			return rep, err
		}
	}
	sw := &sweeper{cfg: cfg, target: strings.TrimRight(target, "/"), reps: reps, client: &http.Client{Timeout: 5 * time.Second}}
	if err := sw.waitReady(ctx); err != nil {
		return rep, err
	}
	for _, c := range cfg.cases() {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		start := time.Now()
		res := sw.run(ctx, c)
		rep.Cases = append(rep.Cases, res)
		fmt.Fprintf(cfg.Progress, "case %3d %-24s %-12s %5dms", c.n, c, res.Cell(), time.Since(start).Milliseconds())
		if c.engineTool() {
			fmt.Fprintf(cfg.Progress, " tool calls %d", res.ToolCalls)
		}
		if res.Tries > 1 {
			fmt.Fprintf(cfg.Progress, " (%d tries)", res.Tries)
		}
		fmt.Fprintln(cfg.Progress)
		for _, v := range res.Violations {
			fmt.Fprintf(cfg.Progress, "    %s\n", v)
		}
	}
	return rep, nil
}

// sweeper runs the cases of a sweep against one target.
type sweeper struct {
	cfg    SweepConfig
	target string
	reps   *sweepReplicas
	client *http.Client // the sweep's own calls: readiness, the replicas' records
	// rest is how long the target is given, before the next case, to take a replica back
	// that the last case crashed, overloaded or cut off.
	rest time.Duration
}

// Limits of a case's tries and of the time between them.
const (
	maxTries = 4
	missWait = 300 * time.Millisecond
)

// run runs case c until its fault came into play, at most maxTries times. A try that
// broke a rule is the case's result whether or not the fault came into play: the target
// broke the contract all the same.
func (s *sweeper) run(ctx context.Context, c sweepCase) CaseResult {
	var res CaseResult
	for try := 1; ; try++ {
		res = s.try(ctx, c)
		res.Tries = try
		if !res.Missed || len(res.Violations) > 0 || try >= maxTries || ctx.Err() != nil {
			return res
		}
		s.rest = max(s.rest, missWait*time.Duration(try))
	}
}

// answers is the answer each replica gives r: the sim's documented function of its name,
// the prompt and the seed.
func (s *sweeper) answers(r *request) map[string]answer {
	out := map[string]answer{}
	for _, srv := range s.reps.sims {
		out[srv.Name()] = textAnswer(srv.Name(), r, []sim.Message{{Role: "user", Content: r.prompts[0]}})
	}
	return out
}

// caseRequest is the request of case c: a streamed answer of N tokens (a stalling
// client's of StallTokens), greedy, seeded and run to its length, under a prompt of its
// own. At toolPoint it is a Responses request, streamed or whole, with the engine-run
// mcp tool, greedy and at most N tokens long (the Responses API takes neither a seed nor
// ignore_eos: its answer is the sim's at seed 0, cut at its natural length).
func (s *sweeper) caseRequest(c sweepCase) *request {
	r := &request{n: c.n, endpoint: s.cfg.API, stream: true, prompts: []string{fmt.Sprintf("chaos sweep case %d: %s", c.n, c)},
		choicesN: 1, maxTokens: s.cfg.Tokens, ignoreEOS: true, continues: -1, fault: simFault(c), faultKind: c.action}
	if c.action == "stall" {
		r.maxTokens = s.cfg.StallTokens
	}
	if c.engineTool() {
		r.endpoint, r.stream, r.ignoreEOS, r.engineTool = "responses", !c.whole, false, true
	}
	r.bodyBytes = r.body(r.stream)
	return r
}

// restAfter is how long the target is given after case c before the next case: a crashed
// replica must be dialled again (fencegate keeps it out for its dead_cooldown), one that
// said it was busy is avoided for its Retry-After (fencegate: 1 s without one), a healed
// partition must see its heartbeats again, and the load a replica reports must no longer
// count the request whose client left or stalled.
func restAfter(c sweepCase) time.Duration {
	switch c.action {
	case "crash":
		return 300 * time.Millisecond
	case "status:429", "status:503":
		return 1100 * time.Millisecond
	case "partition":
		return 600 * time.Millisecond
	case "leave", "stall":
		return 100 * time.Millisecond
	}
	return 20 * time.Millisecond
}
