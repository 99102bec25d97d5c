package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/sim"
)

// replicas are the simulated engines of a run and, in fenced mode, their agents; the fault
// proxies stand between the gateway and the agents (fenced mode) or the engines (direct
// mode with partitions).
type replicas struct {
	sims    []*sim.Server           // every engine: the generating ones, then the embedding ones
	agents  map[string]*agent.Agent // by replica name
	proxies []*faultproxy.Proxy
	// proxied names the replica behind each proxy.
	proxied map[*faultproxy.Proxy]string
	// config is the generating pool's replicas, embedConfig the embedding pool's.
	config, embedConfig []config.Replica
	intervals           map[string]int    // tokens per chunk, by replica name
	toolIDs             map[string]string // a tool call id in each engine's shape, by replica name
	// cuts are the partitions of each replica's link, once the run is over.
	cuts    map[string][]window
	closers []func()
	// tools is the MCP server every generating engine calls for a Responses request's
	// engine-run mcp tool (engineToolLabel): a ticket system whose calls are counted.
	tools *sim.ToolServer
}

// window is a span of time, from start to end.
type window struct{ start, end time.Time }

// Tool call ids in the two shapes the sim makes them (only the shape matters).
const (
	vllmToolID    = "chatcmpl-tool-00000000000000000000000000000000"
	mistralToolID = "A1b2C3d4E"
)

// startReplicas starts cfg.Replicas generating engines and cfg.EmbedReplicas embedding
// engines. The first generating one sends a chunk per token; the others send 2–4 tokens
// per chunk (vLLM's --stream-interval), drawn from rng, so that the gateway's token counts
// are tested against chunks that carry several tokens. Every other replica makes tool call
// ids in Mistral's shape, which the gateway's ids must keep. The generating engines keep
// Responses (vLLM's VLLM_ENABLE_RESPONSES_API_STORE), so a request can continue one.
func startReplicas(cfg Config, rng *rand.Rand) (*replicas, error) {
	r := &replicas{agents: map[string]*agent.Agent{}, proxied: map[*faultproxy.Proxy]string{}, intervals: map[string]int{},
		toolIDs: map[string]string{}, cuts: map[string][]window{}}
	tools, err := sim.StartToolServer(engineToolLabel)
	if err != nil {
		return nil, err
	}
	r.tools = tools
	r.closers = append(r.closers, func() { tools.Close() })
	for i := 0; i < cfg.Replicas; i++ {
		sc := sim.Config{Name: fmt.Sprintf("sim-%d", i+1), DecodePerToken: cfg.DecodePerToken, RestartAfter: 50 * time.Millisecond,
			StreamInterval: 1, ToolCallIDStyle: sim.ToolCallIDsVLLM, EnableResponsesStore: true, ToolServers: []string{tools.URL()}}
		if i > 0 {
			sc.StreamInterval = 2 + rng.IntN(3)
		}
		if i%2 == 1 {
			sc.ToolCallIDStyle = sim.ToolCallIDsMistral
		}
		rep, err := r.start(cfg, sc)
		if err != nil {
			r.close()
			return nil, err
		}
		r.config = append(r.config, rep)
		r.intervals[sc.Name] = sc.StreamInterval
		r.toolIDs[sc.Name] = vllmToolID
		if sc.ToolCallIDStyle == sim.ToolCallIDsMistral {
			r.toolIDs[sc.Name] = mistralToolID
		}
	}
	for i := 0; i < cfg.EmbedReplicas; i++ {
		sc := sim.Config{Name: fmt.Sprintf("embed-%d", i+1), Model: embedModel, Task: sim.TaskEmbed, PrefillPerToken: cfg.DecodePerToken,
			RestartAfter: 50 * time.Millisecond}
		rep, err := r.start(cfg, sc)
		if err != nil {
			r.close()
			return nil, err
		}
		r.embedConfig = append(r.embedConfig, rep)
	}
	return r, nil
}

// start starts one engine and, as the mode asks, its agent and the fault proxy in front of
// it, and returns the replica as the gateway is to reach it.
func (r *replicas) start(cfg Config, sc sim.Config) (config.Replica, error) {
	s, err := sim.Start(sc)
	if err != nil {
		return config.Replica{}, err
	}
	r.closers = append(r.closers, func() { s.Close() })
	r.sims = append(r.sims, s)
	rep := config.Replica{Name: s.Name(), URL: s.URL()}
	target := strings.TrimPrefix(s.URL(), "http://")
	if cfg.Fenced {
		a, err := agent.Start(agent.Config{Engine: s.URL(), Listen: "127.0.0.1:0", Logger: cfg.Logger})
		if err != nil {
			return rep, err
		}
		r.closers = append(r.closers, func() { a.Close() })
		r.agents[s.Name()] = a
		target, rep.Agent = strings.TrimPrefix(a.URL(), "http://"), true
	}
	if cfg.Fenced || cfg.Partitions > 0 {
		p, err := faultproxy.Start(target)
		if err != nil {
			return rep, err
		}
		r.closers = append(r.closers, func() { p.Close() })
		r.proxies = append(r.proxies, p)
		r.proxied[p] = s.Name()
		rep.URL = p.URL()
	}
	return rep, nil
}

// close stops everything, the proxies first.
func (r *replicas) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// partition cuts random gateway↔replica links cfg.Partitions times while the plan runs;
// the returned channel closes once every link is healed again, and r.cuts then holds
// when each was cut. In fenced mode the agent's
// leases fence what is cut off; in direct mode the gateway's timeouts fire and nothing
// may be rerun.
func (r *replicas) partition(ctx context.Context, cfg Config, rng *rand.Rand) <-chan struct{} {
	done := make(chan struct{})
	if len(r.proxies) == 0 || cfg.Partitions == 0 {
		close(done)
		return done
	}
	// Drawn up front: the plan stays a function of the seed.
	type cut struct {
		proxy      *faultproxy.Proxy
		after, dur time.Duration
	}
	// A cut lasts two to three first-token timeouts, longer than the gateway takes to give
	// up on an attempt behind it (a timeout, or in fenced mode the lost heartbeat). The
	// fault proxy drops what crosses a black hole, where a real network's TCP would deliver
	// it late: a cut that healed before the gateway gave up would resume a stream with a
	// hole in it, a fault no network makes.
	cuts := make([]cut, cfg.Partitions)
	for i := range cuts {
		cuts[i] = cut{r.proxies[rng.IntN(len(r.proxies))], time.Duration(100+rng.IntN(300)) * time.Millisecond,
			2*firstTokenTimeout + time.Duration(rng.Int64N(int64(firstTokenTimeout)))}
	}
	go func() {
		defer close(done)
		for _, c := range cuts {
			// Pacing the fault schedule, not waiting for anything to happen.
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.after):
			}
			start := time.Now()
			c.proxy.BlackHole(faultproxy.Both)
			select {
			case <-ctx.Done():
			case <-time.After(c.dur):
			}
			c.proxy.Heal()
			name := r.proxied[c.proxy]
			r.cuts[name] = append(r.cuts[name], window{start, time.Now()})
		}
	}()
	return done
}
