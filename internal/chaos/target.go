package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/sim"
)

// TargetEnv is what a target's configuration needs to put the sweep's replicas behind it.
type TargetEnv struct {
	Target   string // the target's base URL, as the sweep's client calls it
	Host     string // its host and port
	Port     string
	Model    string // the model name every request asks for
	Fenced   bool   // each replica URL is a fencegate agent's (agent: true in fencegate)
	Replicas []ReplicaEnv
	// ToolServer is the MCP server every replica runs its engine-run tools on (its
	// --tool-server): a ticket system that counts its calls.
	ToolServer string
}

// ReplicaEnv is one replica as the target reaches it: through the fault proxy in front
// of its engine (or of its agent, in fenced mode).
type ReplicaEnv struct {
	Name   string
	URL    string // http://Addr
	Addr   string // Host:Port
	Host   string
	Port   string
	Engine string // the engine's own URL, behind the proxy (and the agent)
	Agent  bool
}

// sweepReplicas are the sweep's simulated engines, their agents in fenced mode, the
// fault proxy in front of each, and the tool server they all call.
type sweepReplicas struct {
	sims    []*sim.Server
	agents  map[string]*agent.Agent
	proxies map[string]*faultproxy.Proxy // by replica name
	order   []string
	closers []func()
	// tools is the counting MCP server (engineToolLabel) every engine calls for the
	// engine-run mcp tool of a toolPoint case: one for all replicas, so that a request
	// run on two replicas shows two calls.
	tools *sim.ToolServer
}

// portOf is the address of the i-th port of a kind (0: replicas, 1: agents, 2: proxies, 3:
// the in-process gateway) when the sweep has fixed ports, else a free port.
func portOf(cfg SweepConfig, kind, i int) string {
	if cfg.Ports <= 0 {
		return "127.0.0.1:0"
	}
	return fmt.Sprintf("127.0.0.1:%d", cfg.Ports+10*kind+i)
}

// startSweepReplicas starts cfg.Replicas engines that stream a chunk per token, each
// behind a fault proxy (and, in fenced mode, an agent between the two), and the tool
// server they run engine-run tools on (--tool-server, reached directly, not through the
// proxies: a partition cuts the gateway off, not the engine's tools).
func startSweepReplicas(cfg SweepConfig) (*sweepReplicas, error) {
	r := &sweepReplicas{agents: map[string]*agent.Agent{}, proxies: map[string]*faultproxy.Proxy{}}
	tools, err := sim.StartToolServer(engineToolLabel)
	if err != nil {
		return nil, err
	}
	r.tools = tools
	r.closers = append(r.closers, func() { tools.Close() })
	for i := range cfg.Replicas {
		sc := sim.Config{Name: fmt.Sprintf("sim-%d", i+1), Addr: portOf(cfg, 0, i), DecodePerToken: cfg.DecodePerToken,
			PrefillPerToken: time.Millisecond, RestartAfter: 50 * time.Millisecond, StreamInterval: 1,
			MaxModelLen: cfg.StallTokens + 4096, ToolServers: []string{tools.URL()}}
		s, err := sim.Start(sc)
		if err != nil {
			r.close()
			return nil, err
		}
		r.closers = append(r.closers, func() { s.Close() })
		r.sims = append(r.sims, s)
		r.order = append(r.order, s.Name())
		target := strings.TrimPrefix(s.URL(), "http://")
		if cfg.Fenced {
			a, err := agent.Start(agent.Config{Engine: s.URL(), Listen: portOf(cfg, 1, i), Logger: cfg.Logger})
			if err != nil {
				r.close()
				return nil, err
			}
			r.closers = append(r.closers, func() { a.Close() })
			r.agents[s.Name()] = a
			target = strings.TrimPrefix(a.URL(), "http://")
		}
		p, err := faultproxy.StartOn(portOf(cfg, 2, i), target)
		if err != nil {
			r.close()
			return nil, err
		}
		r.closers = append(r.closers, func() { p.Close() })
		r.proxies[s.Name()] = p
	}
	return r, nil
}

// close stops everything, the proxies first.
func (r *sweepReplicas) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// env is what the target's configuration needs.
func (r *sweepReplicas) env(cfg SweepConfig, target string) TargetEnv {
	e := TargetEnv{Target: target, Model: "sim-model", Fenced: cfg.Fenced, ToolServer: r.tools.URL()}
	if u := strings.TrimPrefix(strings.TrimPrefix(target, "http://"), "https://"); u != "" {
		hostport, _, _ := strings.Cut(u, "/")
		e.Host, e.Port, _ = net.SplitHostPort(hostport)
	}
	for _, s := range r.sims {
		p := r.proxies[s.Name()]
		host, port, _ := net.SplitHostPort(p.Addr())
		e.Replicas = append(e.Replicas, ReplicaEnv{Name: s.Name(), URL: p.URL(), Addr: p.Addr(), Host: host, Port: port,
			Engine: s.URL(), Agent: cfg.Fenced})
	}
	return e
}

// engineURLs are the engines' own URLs, by name, for the traces' attempts (a replay
// against a replica goes to its engine).
func (r *sweepReplicas) engineURLs() map[string]string {
	out := map[string]string{}
	for _, s := range r.sims {
		out[s.Name()] = s.URL()
	}
	return out
}

// recordIDs are the ids of every engine request so far, so that a case can tell its own.
func (r *sweepReplicas) recordIDs() map[string]bool {
	ids := map[string]bool{}
	for _, s := range r.sims {
		for _, rec := range s.Records() {
			ids[rec.ID] = true
		}
	}
	return ids
}

// running lists the engine requests not in before that are still running.
func (r *sweepReplicas) running(before map[string]bool) []string {
	var ids []string
	for _, s := range r.sims {
		for _, rec := range s.Records() {
			if !before[rec.ID] && rec.Outcome == "" {
				ids = append(ids, rec.ID)
			}
		}
	}
	return ids
}

// watch reports, once, the name of the first replica with an engine request not in
// before that meets cond. Its goroutines end with ctx and are counted in wg.
func (r *sweepReplicas) watch(ctx context.Context, wg *sync.WaitGroup, before map[string]bool, cond func(sim.Record) bool) <-chan string {
	out := make(chan string, len(r.sims))
	for _, s := range r.sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.WaitRecord(ctx, func(rec sim.Record) bool { return !before[rec.ID] && cond(rec) }); err == nil {
				out <- s.Name()
			}
		}()
	}
	return out
}

// fetchRecords reads every replica's records (GET /sim/requests) and keeps the engine
// requests not in before, oldest first.
func (r *sweepReplicas) fetchRecords(ctx context.Context, client *http.Client, before map[string]bool) ([]replicaRecord, time.Time, error) {
	var out []replicaRecord
	at := time.Now()
	for _, s := range r.sims {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/sim/requests", nil)
		if err != nil {
			return nil, at, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, at, fmt.Errorf("%s: %w", s.Name(), err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, at, fmt.Errorf("%s: %w", s.Name(), err)
		}
		recs, err := decodeRecords(b)
		if err != nil {
			return nil, at, fmt.Errorf("%s: %w", s.Name(), err)
		}
		for _, rec := range recs {
			if !before[rec.ID] {
				out = append(out, replicaRecord{Replica: s.Name(), Record: rec})
			}
		}
	}
	sortRecords(out)
	return out, at, nil
}

// inProcessGateway is fencegate serving the sweep's replicas.
type inProcessGateway struct {
	url   string
	close func()
}

// startGateway starts fencegate in front of the replicas with the chaos run's short
// timings, the faulted replica in a tier of its own. Ejection is off (as nginx's max_fails=0 in docs/chaos.md): a replica failing
// case after case on purpose must still be tried first by the next case.
func startGateway(ctx context.Context, cfg SweepConfig, reps *sweepReplicas) (*inProcessGateway, error) {
	var replicas []config.Replica
	for i, s := range reps.sims {
		// The faulted replica is the only one of the first tier, so that every case's
		// request goes to it first while it is available.
		replicas = append(replicas, config.Replica{Name: s.Name(), URL: reps.proxies[s.Name()].URL(), Agent: cfg.Fenced, Priority: min(i, 1)})
	}
	gcfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "sim-model", Replicas: replicas}}}
	setChaosTimings(gcfg, cfg.Fenced)
	gcfg.Health.EjectAfter = -1
	// Load as the engines report it, fresh: a replica still busy in the last scrape with
	// the request a client left gets no new work, and the next case would miss it.
	gcfg.Health.ScrapeEvery = config.Duration(50 * time.Millisecond)
	if err := gcfg.Validate(); err != nil {
		return nil, err
	}
	gw, err := gateway.New(ctx, gcfg, gateway.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	gw.Start()
	ln, err := net.Listen("tcp", portOf(cfg, 3, 0))
	if err != nil {
		gw.Close()
		return nil, err
	}
	srv := serveGateway(ln, gw.Handler())
	return &inProcessGateway{url: srv.url, close: func() {
		srv.closeWithin(closeWait)
		gw.Close()
	}}, nil
}

// waitReady sends a plain request until the target answers it whole, for at most
// ReadyTimeout.
func (s *sweeper) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.ReadyTimeout)
	r := &request{endpoint: s.cfg.API, stream: true, prompts: []string{"chaos sweep: is the target ready?"}, choicesN: 1,
		maxTokens: 2, ignoreEOS: true, continues: -1}
	r.bodyBytes = r.body(true)
	var last string
	for {
		ok, why := s.probe(ctx, r)
		if ok {
			return nil
		}
		last = why
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer a plain request within %s: %s", s.target, s.cfg.ReadyTimeout, last)
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// probe sends r once and reports whether the answer came whole.
func (s *sweeper) probe(ctx context.Context, r *request) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target+r.path(), strings.NewReader(string(r.bodyBytes)))
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err.Error()
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "[DONE]") {
		return false, fmt.Sprintf("status %d: %.200s", resp.StatusCode, b)
	}
	return true, ""
}
