package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

// Main is `fencegate chaos`: one seeded run, its report, and every violation found. It
// fails when a history broke the contract.
func Main(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var cfg Config
	fs.IntVar(&cfg.Requests, "requests", 200, "logical requests to send")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "requests in flight at once")
	fs.IntVar(&cfg.Replicas, "replicas", 3, "simulated replicas")
	fs.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault plan")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0.6, "share of requests that carry a fault")
	fs.DurationVar(&cfg.DecodePerToken, "decode-per-token", 2*time.Millisecond, "simulated decode time per token")
	fs.Float64Var(&cfg.Rate, "rate", 150, "requests started per second")
	fs.BoolVar(&cfg.Fenced, "fenced", false, "put an agent (behind a fault proxy) in front of every replica")
	fs.IntVar(&cfg.Partitions, "partitions", 0, "how many times to cut a random gateway-replica link (the agent's with --fenced, the engine's without)")
	verbose := fs.Bool("verbose", false, "show the gateway's and the agents' logs on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
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
