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

// replicas are the simulated engines of a run and, in fenced mode, their agents and the
// fault proxies between the gateway and the agents.
type replicas struct {
	sims    []*sim.Server
	agents  map[string]*agent.Agent // by replica name
	proxies []*faultproxy.Proxy
	config  []config.Replica
	closers []func()
}

func startReplicas(cfg Config) (*replicas, error) {
	r := &replicas{agents: map[string]*agent.Agent{}}
	for i := 0; i < cfg.Replicas; i++ {
		s, err := sim.Start(sim.Config{Name: fmt.Sprintf("sim-%d", i+1), DecodePerToken: cfg.DecodePerToken, RestartAfter: 50 * time.Millisecond})
		if err != nil {
			r.close()
			return nil, err
		}
		r.closers = append(r.closers, func() { s.Close() })
		r.sims = append(r.sims, s)
		rep := config.Replica{Name: s.Name(), URL: s.URL()}
		if cfg.Fenced {
			a, err := agent.Start(agent.Config{Engine: s.URL(), Listen: "127.0.0.1:0"})
			if err != nil {
				r.close()
				return nil, err
			}
			r.closers = append(r.closers, func() { a.Close() })
			p, err := faultproxy.Start(strings.TrimPrefix(a.URL(), "http://"))
			if err != nil {
				r.close()
				return nil, err
			}
			r.closers = append(r.closers, func() { p.Close() })
			r.agents[s.Name()] = a
			r.proxies = append(r.proxies, p)
			rep.URL, rep.Agent = p.URL(), true
		}
		r.config = append(r.config, rep)
	}
	return r, nil
}

// close stops everything, the proxies first.
func (r *replicas) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// partition cuts random gateway↔agent links cfg.Partitions times while the plan runs; the
// returned channel closes once every link is healed again.
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
	cuts := make([]cut, cfg.Partitions)
	for i := range cuts {
		cuts[i] = cut{r.proxies[rng.IntN(len(r.proxies))], time.Duration(100+rng.IntN(300)) * time.Millisecond,
			time.Duration(300+rng.IntN(400)) * time.Millisecond}
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
			c.proxy.BlackHole(faultproxy.Both)
			select {
			case <-ctx.Done():
			case <-time.After(c.dur):
			}
			c.proxy.Heal()
		}
	}()
	return done
}
