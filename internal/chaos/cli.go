package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
)

// Main is `fencegate chaos`: one seeded run, its report, and every violation found. It
// fails when a history broke the contract. With --exhaustive it runs the sweep instead
// (every fault point × action once); with --target, against a gateway at a URL, judged
// from the wire and the replicas' records alone.
func Main(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, `Usage:
  fencegate chaos [--requests N] [--seed S] [--fenced] [--partitions K]
      seeded random faults against fencegate started in-process in front of simulated
      replicas on loopback; every history checked against the contract, journal included
  fencegate chaos --exhaustive [--tokens N] [--fenced] [--actions A,B] [--points P,Q] [--traces DIR]
      the sweep: one request per fault point (accept, prefill, computed:K, sent:K for K
      in 1..N) × action (crash, reset, hang, error, status:429|500|503, client stall,
      client leave; partition with --fenced), deterministic, a summary table at the end;
      then at tool:1, right after the engine ran an mcp tool of a Responses request on a
      counting tool server, a streamed and a whole request × every action but stall
      (--tool-actions)
  fencegate chaos --target URL [--exhaustive] [--config-template FILE] [--target-cmd CMD]
      the same cases against any gateway at URL: the replicas start on loopback and their
      URLs are printed (or filled into FILE, a Go template; CMD then starts the gateway),
      and every case is judged from the wire and the replicas' own records alone; without
      --exhaustive, --requests cases drawn from the sweep with --seed

Each violation names its rule (splice, repeat, silent-end, rerun-after-output, zombie,
overlap, held, after-end, tool-twice, tool-error); with --traces each is written as a trace document that
"fencegate replay" resends. The exit status is 1 when any case broke the contract.
See docs/chaos.md.

Flags:
`)
		fs.PrintDefaults()
	}
	var cfg Config
	fs.IntVar(&cfg.Requests, "requests", 200, "logical requests to send (with --target and without --exhaustive: cases drawn from the sweep)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "requests in flight at once (in-process run)")
	fs.IntVar(&cfg.Replicas, "replicas", 3, "simulated replicas (2 with --target or --exhaustive, unless set)")
	fs.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault plan")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0.6, "share of requests that carry a fault (in-process run)")
	fs.Float64Var(&cfg.EngineTools, "engine-tools", 0.25, "share of the plain Responses requests that let the engine run a tool itself, on a counting MCP server (in-process run)")
	fs.DurationVar(&cfg.DecodePerToken, "decode-per-token", 2*time.Millisecond, "simulated decode time per token (10ms with --target or --exhaustive, unless set)")
	fs.Float64Var(&cfg.Rate, "rate", 150, "requests started per second (in-process run)")
	fs.BoolVar(&cfg.Fenced, "fenced", false, "put an agent (behind a fault proxy) in front of every replica")
	fs.IntVar(&cfg.MaxOutstanding, "max-outstanding", 0, "the gateway's requests in flight on each replica (in-process run; 0: none): more wait in the pool's queue")
	fs.IntVar(&cfg.Partitions, "partitions", 0, "how many times to cut a random gateway-replica link (in-process run; the agent's with --fenced, the engine's without)")
	verbose := fs.Bool("verbose", false, "show the gateway's and the agents' logs on stderr")

	var sw SweepConfig
	target := fs.String("target", "", "the gateway to check, a base URL such as http://127.0.0.1:18380: judged from the wire and the replicas' records alone")
	exhaustive := fs.Bool("exhaustive", false, "one run per fault point × action, deterministic, with a summary table")
	fs.IntVar(&sw.Tokens, "tokens", 8, "N, the length of every answer: the points are accept, prefill, computed:K and sent:K for K in 1..N")
	fs.StringVar(&sw.API, "api", "chat", "the endpoint the requests stream from: chat or completions")
	actions := fs.String("actions", "", "comma-separated actions (default all but partition, which --fenced adds): "+strings.Join(SweepActions, ","))
	points := fs.String("points", "", "comma-separated points (default all, tool:1 included)")
	toolActions := fs.String("tool-actions", "", "comma-separated actions at tool:1 (default those of --actions but stall)")
	fs.StringVar(&sw.Traces, "traces", "", "write each violation's trace (fencegate replay can rerun it) into this directory")
	fs.IntVar(&sw.Ports, "ports", 0, "listen on fixed ports from this one: replica i at +i, its agent at +10+i, its fault proxy at +20+i, an in-process gateway at +30 (0: free ports)")
	fs.IntVar(&sw.StallTokens, "stall-tokens", 30000, "the answer a stalling client asks for: enough to fill the buffers between replica and client")
	fs.DurationVar(&sw.ClientTimeout, "client-timeout", 15*time.Second, "bound of one response")
	fs.DurationVar(&sw.LeaveWait, "leave-wait", time.Second, "how long a replica has to stop decoding after its client left")
	fs.DurationVar(&sw.StallWait, "stall-wait", 5*time.Second, "how long a replica may run after its client stopped reading")
	fs.DurationVar(&sw.EndWait, "end-wait", 3*time.Second, "how long a replica may run after the response ended")
	fs.DurationVar(&sw.ReadyTimeout, "ready-timeout", time.Minute, "how long to wait for the target to answer a plain request before the first case")
	tmpl := fs.String("config-template", "", "with --target: a text/template of the target's configuration, filled with the replicas' URLs (docs/chaos.md)")
	tmplOut := fs.String("config-out", "", "where the filled template is written (default: the template's path without .tmpl)")
	cmd := fs.String("target-cmd", "", "with --target: a shell command run once the configuration is written ($FENCEGATE_CHAOS_CONFIG names it), to (re)start the target; stopped with SIGTERM at the end if still running")
	if err := cli.Parse(fs, args, "chaos"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("chaos: unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		cfg.Logger = logger
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if !*exhaustive && *target == "" {
		for _, f := range []string{"tokens", "api", "actions", "points", "tool-actions", "traces", "ports", "stall-tokens", "client-timeout", "leave-wait",
			"stall-wait", "end-wait", "ready-timeout", "config-template", "config-out", "target-cmd"} {
			if set[f] {
				return fmt.Errorf("chaos: --%s needs --exhaustive or --target", f)
			}
		}
		return runRandom(ctx, cfg, stdout)
	}
	if *target == "" && (*tmpl != "" || *cmd != "") {
		return fmt.Errorf("chaos: --config-template and --target-cmd need --target")
	}
	if *tmplOut != "" && *tmpl == "" {
		return fmt.Errorf("chaos: --config-out needs --config-template")
	}
	if *target != "" {
		u, err := url.Parse(*target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("chaos: --target %q: want a base URL such as http://127.0.0.1:18380", *target)
		}
	}
	if set["tokens"] && sw.Tokens < 1 {
		return fmt.Errorf("chaos: --tokens %d: an answer has at least 1 token", sw.Tokens)
	}
	sw.Target, sw.Fenced, sw.Logger, sw.Progress = *target, cfg.Fenced, logger, stdout
	if set["replicas"] {
		sw.Replicas = cfg.Replicas
	}
	if set["decode-per-token"] {
		sw.DecodePerToken = cfg.DecodePerToken
	}
	if *actions != "" {
		sw.Actions = strings.Split(*actions, ",")
	}
	if *points != "" {
		sw.Points = strings.Split(*points, ",")
	}
	if *toolActions != "" {
		sw.ToolActions = strings.Split(*toolActions, ",")
	}
	if !*exhaustive {
		sw.Sample, sw.Seed = cfg.Requests, cfg.Seed
	}
	if *target != "" {
		tp := &targetProcess{template: *tmpl, out: *tmplOut, cmd: *cmd, stdout: stdout, readyTimeout: sw.ReadyTimeout}
		defer tp.stop()
		sw.Prepare = tp.prepare
	}
	rep, err := RunSweep(ctx, sw)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	what := "sweep"
	if !*exhaustive {
		what = fmt.Sprintf("seed %d, %d cases drawn from the sweep", cfg.Seed, sw.Sample)
	}
	fmt.Fprintf(stdout, "\n%s: %s, answers of %d tokens\n", what, rep.Target, max(sw.Tokens, 1))
	if *exhaustive {
		fmt.Fprint(stdout, rep.Table())
	}
	fmt.Fprintln(stdout, rep.Summary())
	for _, c := range rep.Cases {
		for i, v := range c.Violations {
			fmt.Fprintf(stdout, "VIOLATION case %d %s@%s: %s", c.N, c.Action, c.Row(), v)
			if i < len(c.Traces) {
				fmt.Fprintf(stdout, " (trace %s)", c.Traces[i])
			}
			fmt.Fprintln(stdout)
		}
	}
	if n := rep.Violating(); n > 0 {
		return fmt.Errorf("chaos: %d of %d cases broke the contract", n, len(rep.Cases))
	}
	return nil
}

// runRandom is the in-process seeded run.
func runRandom(ctx context.Context, cfg Config, stdout io.Writer) error {
	rep, err := Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	fmt.Fprintf(stdout, "seed %d: %s\nby API:\n%scontinued responses: %s\nby fault, client and shape:\n%s", cfg.Seed, rep, rep.APIs(), rep.Continuations, rep.Kinds())
	for _, v := range rep.Violations {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	if len(rep.Violations) > 0 {
		return fmt.Errorf("chaos: %d violations of the contract", len(rep.Violations))
	}
	return nil
}
