package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// demo runs a gateway in front of three simulated replicas on loopback and explains how to
// watch the failover contract at work.
func demo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "gateway address")
	adminListen := fs.String("admin-listen", "127.0.0.1:9090", "the admin listener's address (loopback: the operator's endpoints, such as a request's trace, need no key there)")
	basePort := fs.Int("replica-base-port", 9001, "first replica port; the three replicas use this port and the next two (0: any free ports)")
	decode := fs.Duration("decode-per-token", 40*time.Millisecond, "simulated decode time per token")
	prefill := fs.Duration("prefill-per-token", 2*time.Millisecond, "simulated prefill time per prompt token")
	restart := fs.Duration("restart-after", 10*time.Second, "a crashed replica comes back after this long")
	storeDSN := fs.String("store", "", "request journal (default: a SQLite file in a temporary directory, removed at exit)")
	if err := fs.Parse(args); err != nil {
		return err
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
		replicas = append(replicas, config.Replica{Name: name, URL: s.URL()})
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
	gw, admin := "http://"+*listen, "http://"+*adminListen
	body := `{"model":"sim-model","stream":true,"max_tokens":24,"messages":[{"role":"user","content":"Tell me about honest failover."}]}`
	fmt.Fprintf(stdout, `fencegate demo: gateway %s, replicas sim-1 %s, sim-2 %s, sim-3 %s

An idle pool sends new work to sim-1 first. Try, in another terminal:

  # 1. a complete streamed answer
  curl -N %s/v1/chat/completions -H 'Content-Type: application/json' -d '%s'

  # 2. sim-1 crashes during prefill: nothing was delivered, so the gateway reruns on
  #    another replica and you get one complete answer (X-Request-Id tells you which request)
  curl -N -i %s/v1/chat/completions -H 'X-Sim-Fault: crash@prefill;on=sim-1' -H 'Content-Type: application/json' -d '%s'

  # 3. the replica crashes right after the 4th token was sent: the stream ends with one
  #    upstream_decode_interrupted error event and no [DONE] — never a spliced answer
  curl -N -i %s/v1/chat/completions -H 'X-Sim-Fault: crash@sent:3' -H 'Content-Type: application/json' -d '%s'

  # 4. what happened to a request, after the fact (use the X-Request-Id of step 2 or 3)
  curl %s/v1/requests/req_...

  # 5. the trace of the interrupted request of step 3 (what it asked, each attempt, every
  #    byte the client received); replayed on the replica that served it (its attempts
  #    name it: sim-1, once it is back), it meets the same fault at the same point
  #    (traces are the operator's: they are read on the admin listener)
  curl -s %s/admin/requests/req_.../trace > trace.json
  go run ./cmd/fencegate replay trace.json --url %s

Crashed replicas come back after %s. Ctrl-C stops everything.
`, gw, replicas[0].URL, replicas[1].URL, replicas[2].URL, gw, body, gw, body, gw, body, gw, admin, replicas[0].URL, *restart)
	// The demo is for people at a terminal: text logs, no configuration file to reload.
	return runGateway(ctx, cfg, "", slog.New(slog.NewTextHandler(os.Stderr, nil)), stdout)
}
