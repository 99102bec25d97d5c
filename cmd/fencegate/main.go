// Command fencegate is an OpenAI-compatible gateway for self-hosted LLM inference pools
// that fails over between replicas honestly. One binary, several subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/chaos"
	"github.com/fencegate/fencegate/internal/sim"
)

const usage = `fencegate — an honest failover gateway for LLM inference pools

Usage:
  fencegate serve --config FILE     run the gateway
  fencegate check --config FILE     validate a configuration and the files it names, start nothing
  fencegate version [--json]        print the version and the revision the binary was built from
  fencegate keys create|list|revoke manage API keys in the store (the key is printed once)
  fencegate agent --engine URL      run the lease-enforcing sidecar in front of one engine
  fencegate sim [flags]             run a simulated OpenAI-compatible engine
  fencegate demo [flags]            run a gateway and three simulated replicas on loopback
  fencegate chaos [flags]           run seeded fault scenarios on loopback and check every history;
                                    --exhaustive: every fault point × action; --target URL: any gateway
  fencegate bench [flags]           load an OpenAI-compatible endpoint; time to first token, token gaps, throughput
  fencegate replay TRACE.json       resend a traced request (--url URL) and compare the answer with the client's

Run "fencegate <command> --help" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		code := 1
		var st *exitStatus
		if errors.As(err, &st) {
			code = st.code
		}
		if !errors.Is(err, flag.ErrHelp) && (st == nil || st.err != nil) {
			fmt.Fprintln(os.Stderr, "fencegate:", err)
		}
		os.Exit(code)
	}
}

// run executes one subcommand until it finishes or ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout)
	case "check":
		return check(args[1:], stdout)
	case "version":
		return version(args[1:], stdout)
	case "keys":
		return keysCmd(ctx, args[1:], stdout, stderr)
	case "sim":
		return sim.Main(args[1:], stdout)
	case "agent":
		tuneGC(slog.New(slog.DiscardHandler)) // the agent proxies streams too; its logger is its own
		return agent.Main(args[1:], stdout)
	case "demo":
		return demo(ctx, args[1:], stdout)
	case "chaos":
		return chaos.Main(args[1:], stdout)
	case "bench":
		return bench.Main(ctx, args[1:], stdout, stderr)
	case "replay":
		return replay(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
