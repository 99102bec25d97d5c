package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// demo runs a gateway in front of three simulated replicas on loopback and explains how to
// watch the failover contract at work.
func demo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fencegate demo [flags]\n\nRuns a gateway and three simulated replicas on loopback and prints commands that\nshow a rerun, an honest interruption, a request's record and a replay.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:8080", "gateway address")
	adminListen := fs.String("admin-listen", "127.0.0.1:9090", "the admin listener's address (loopback: the operator's endpoints, such as a request's trace, need no key there)")
	basePort := fs.Int("replica-base-port", 9001, "first replica port; the three replicas use this port and the next two (0: any free ports)")
	decode := fs.Duration("decode-per-token", 40*time.Millisecond, "simulated decode time per token")
	prefill := fs.Duration("prefill-per-token", 2*time.Millisecond, "simulated prefill time per prompt token")
	restart := fs.Duration("restart-after", 10*time.Second, "a crashed replica comes back after this long")
	storeDSN := fs.String("store", "", "request journal (default: a SQLite file in a temporary directory, removed at exit)")
	if err := cli.Parse(fs, args, "demo"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("demo: unexpected arguments %q", fs.Args())
	}
	var replicas []config.Replica
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("sim-%d", i+1)
		addr := "127.0.0.1:0"
		if *basePort != 0 {
			addr = fmt.Sprintf("127.0.0.1:%d", *basePort+i)
		}
		s, err := sim.Start(sim.Config{
			Name: name, Model: "sim-model", Addr: addr,
			DecodePerToken: *decode, PrefillPerToken: *prefill, RestartAfter: *restart,
		})
		if err != nil {
			return fmt.Errorf("start replica %s: %w", name, err)
		}
		defer s.Close()
		// Tiers make the steps deterministic: new work goes to sim-1 while it is up,
		// whatever the replicas' load, so that step 2's fault meets it.
		replicas = append(replicas, config.Replica{Name: name, URL: s.URL(), Priority: i})
	}
	if *storeDSN == "" {
		dir, err := os.MkdirTemp("", "fencegate-demo-")
		if err != nil {
			return fmt.Errorf("demo: journal directory: %w", err)
		}
		defer os.RemoveAll(dir)
		*storeDSN = "sqlite:" + filepath.Join(dir, "fencegate.db")
	}
	cfg := &config.Config{Listen: *listen, AdminListen: *adminListen, Models: []config.Model{{Name: "sim-model", Replicas: replicas}}, Store: *storeDSN}
	cfg.Health.ProbeEvery = config.Duration(time.Second)
	// The demo's requests are the user's own, so the interrupted ones can be read back and
	// replayed (step 5).
	cfg.Traces.Mode = config.TracesErrors
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The gateway opens its listeners in runGateway; an address of port 0 is known only
	// then, so the steps are printed once it listens (runGateway prints the address first).
	steps := func(gw, admin string) string {
		return demoSteps(gw, admin, replicas, *restart, selfCommand())
	}
	// The demo is for people at a terminal: text logs, no configuration file to reload.
	return runGateway(ctx, cfg, "", slog.New(slog.NewTextHandler(os.Stderr, nil)), nil, &demoOutput{w: stdout, steps: steps})
}

// demoBody is the chat request of every step.
const demoBody = `{"model":"sim-model","stream":true,"max_tokens":24,"messages":[{"role":"user","content":"Tell me about honest failover."}]}`

// requestIDCapture is the end of step 3's pipeline: it shows the response (headers
// included) on the terminal and keeps the value of its X-Request-Id header.
const requestIDCapture = `tee /dev/stderr | awk 'tolower($1) == "x-request-id:" {print $2}' | tr -d '\r'`

// demoSteps is what the demo prints once its listeners are open: commands that run as
// printed in bash or zsh from any directory (TestDemoStepsRunAsPrinted runs them).
func demoSteps(gw, admin string, replicas []config.Replica, restart time.Duration, self string) string {
	post := func(flags, fault string) string {
		h := ""
		if fault != "" {
			h = fmt.Sprintf(" -H 'X-Sim-Fault: %s'", fault)
		}
		return fmt.Sprintf("curl %s %s/v1/chat/completions%s -H 'Content-Type: application/json' -d '%s'", flags, gw, h, demoBody)
	}
	return fmt.Sprintf(`
fencegate demo: gateway %s (admin listener %s),
replicas sim-1 %s, sim-2 %s, sim-3 %s

The replicas are simulated engines with vLLM's wire format: their answers are filler
words ("gamma iron uniform ..."), not a model's text. New work goes to sim-1 while it is
up (the demo puts the replicas in priority tiers 0, 1 and 2); reruns go to the others.
Try, in another terminal (bash or zsh):

  # 1. a complete streamed answer
  %s

  # 2. sim-1 crashes during prefill (it is back %s later): nothing was delivered, so
  #    the gateway reruns the request on another replica and you get one complete answer
  %s

  # 3. the replica serving the request resets its connection right after the 4th token
  #    was sent (the replica itself stays up): the stream ends with one
  #    upstream_decode_interrupted error event and no [DONE], never a spliced answer.
  #    The response is shown, and its X-Request-Id kept in $id for steps 4 and 5
  id=$(%s | %s)

  # 4. what happened to that request, after the fact: its attempts and how each ended
  curl -s "%s/v1/requests/$id?wait=10s"

  # 5. its trace (what it asked, each attempt, every byte the client received; traces are
  #    the operator's, read on the admin listener), written to a temporary file and
  #    replayed on the replica its last attempt names: the same fault at the same point
  trace=$(mktemp) && curl -s "%s/admin/requests/$id/trace?wait=10s" -o "$trace" && %s replay "$trace"

Ctrl-C stops everything.
`, gw, admin, replicas[0].URL, replicas[1].URL, replicas[2].URL,
		post("-N", ""),
		restart,
		post("-N -i", "crash@prefill;on=sim-1"),
		post("-sN -i", "reset@sent:3"), requestIDCapture,
		gw, admin, self)
}

// demoOutput passes runGateway's lines through and prints the demo's steps once both
// listeners' addresses are known.
type demoOutput struct {
	w          io.Writer
	steps      func(gw, admin string) string
	gw, admin  string
	pending    string
	stepsShown bool
}

func (d *demoOutput) Write(p []byte) (int, error) {
	if _, err := d.w.Write(p); err != nil {
		return 0, err
	}
	d.pending += string(p)
	for {
		line, rest, ok := strings.Cut(d.pending, "\n")
		if !ok {
			break
		}
		d.pending = rest
		if u, ok := strings.CutPrefix(line, "fencegate gateway listening on "); ok {
			d.gw = u
		}
		if u, ok := strings.CutPrefix(line, "fencegate admin listening on "); ok {
			d.admin = u
		}
	}
	if !d.stepsShown && d.gw != "" && d.admin != "" {
		d.stepsShown = true
		if _, err := io.WriteString(d.w, d.steps(d.gw, d.admin)); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// selfCommand is how the printed steps name this program: "fencegate" when that is what
// the shell finds on PATH, else the absolute path of the running executable (go run's build
// exists as long as the demo runs), so that step 5 works from any directory.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "fencegate"
	}
	if p, err := exec.LookPath("fencegate"); err == nil {
		a, errA := os.Stat(p)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "fencegate"
		}
	}
	return shellQuote(exe)
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain path characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
