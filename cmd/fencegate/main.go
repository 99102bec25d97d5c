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
	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/floorproxy"
	"github.com/fencegate/fencegate/internal/sim"
)

const usage = `fencegate — an honest failover gateway for LLM inference pools

Usage:
  fencegate serve --config FILE     run the gateway
  fencegate check --config FILE     validate a configuration and the files it names, start nothing;
                                    --probe: also ask every replica what it serves
  fencegate version [--json]        print the version and the revision the binary was built from
  fencegate keys create|list|revoke manage API keys in the store (the key is printed once)
  fencegate agent --engine URL      run the lease-enforcing sidecar in front of one engine
  fencegate sim [flags]             run a simulated OpenAI-compatible engine
  fencegate demo [flags]            run a gateway and three simulated replicas on loopback
  fencegate chaos [flags]           run seeded fault scenarios on loopback and check every history;
                                    --exhaustive: every fault point × action; --target URL: any gateway
  fencegate bench [flags]           load an OpenAI-compatible endpoint; time to first token, token gaps, throughput
  fencegate replay TRACE.json       resend a traced request (--url URL) and compare the answer with the client's

Run "fencegate help <command>" or "fencegate <command> --help" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is the process's exit status for what run returned, and prints the error, once:
// 0 for success and for --help (an answer, not a failure), 2 for a mistake in the command
// line, the code an exitStatus carries (replay: 1 means the replay disagrees), else 1.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	code := 1
	var st *exitStatus
	var usage *cli.UsageError
	switch {
	case errors.As(err, &st):
		code = st.code
		if st.err == nil {
			return code // the command has said what there is to say
		}
	case errors.As(err, &usage):
		code = 2
	}
	fmt.Fprintln(stderr, "fencegate:", err)
	return code
}

// run executes one subcommand until it finishes or ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.Usagef("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout)
	case "check":
		return check(ctx, args[1:], stdout)
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
		bench.FloorProxy = floorproxy.Serve
		return bench.Main(ctx, args[1:], stdout, stderr)
	case "replay":
		return replay(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" {
			// fencegate help keys list: the same as fencegate keys list --help.
			return run(ctx, append(append([]string(nil), args[1:]...), "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return cli.Usagef("unknown command %q", args[0])
}
