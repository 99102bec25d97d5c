package gateway

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
)

// live is what one configuration makes of the gateway: the pools of its models, its API
// keys and its policy. Requests read it once, when they start; a reload builds a new one
// and swaps it in (docs/design.md §6).
type live struct {
	cfg    *config.Config
	pools  map[string]*pool
	models []string          // sorted
	keys   map[string]apiKey // bearer key digest → identity
	// promptPrefix is how much of a prompt's text requests keep (openai.Parse): as much as
	// the pool that wants most for its prefix affinity.
	promptPrefix int
}

func (s *Server) current() *live { return s.live.Load() }

// config is the configuration of the moment.
func (s *Server) config() *config.Config { return s.current().cfg }

// build makes a live configuration from cfg. With prev, the pools of models that remain are
// kept (their load, health and budgets go on) and updated in place; the rest are new.
func (s *Server) build(cfg *config.Config, prev *live) (*live, error) {
	l := &live{cfg: cfg, pools: make(map[string]*pool), keys: buildKeys(cfg.Auth)}
	now := s.now()
	type plan struct {
		p     *pool
		m     config.Model
		specs []replicaSpec
		fresh bool
	}
	var plans []plan
	seenAgent := map[string]string{}
	for i, m := range cfg.Models {
		var specs []replicaSpec
		for j, r := range m.Replicas {
			key, err := engineKey(m, j, fmt.Sprintf("models[%d].replicas[%d]", i, j))
			if err != nil {
				return nil, err
			}
			if r.Agent {
				// An agent is renewed by its replica's name in its pool, but two pools
				// must not share a name for different agents: the journal and metrics
				// name a replica by it.
				if other, dup := seenAgent[r.Name]; dup && other != r.URL {
					return nil, fmt.Errorf("models[%d].replicas[%d].name: %q names two agents; give them distinct names", i, j, r.Name)
				}
				seenAgent[r.Name] = r.URL
			}
			specs = append(specs, replicaSpec{Replica: r, key: key})
		}
		var p *pool
		fresh := true
		if prev != nil && prev.pools[m.Name] != nil {
			p, fresh = prev.pools[m.Name], false
		} else {
			p = newPool(m, cfg, now)
			p.requests, p.srv = requestPool{p, s}, s
		}
		plans = append(plans, plan{p, m, specs, fresh})
		l.pools[m.Name] = p
		l.promptPrefix = max(l.promptPrefix, m.Affinity.PrefixBytes)
		l.models = append(l.models, m.Name)
	}
	sort.Strings(l.models)
	// Nothing is changed before every model was read without error.
	for _, pl := range plans {
		if !pl.fresh {
			pl.p.mu.Lock()
			pl.p.configure(pl.m, cfg)
			pl.p.mu.Unlock()
		}
		// At start every replica counts as probed (Start probes them before serving); one
		// that joins a serving gateway waits for its first passing probe.
		pl.p.reconcile(s, "config", pl.specs, pl.fresh && prev == nil)
	}
	return l, nil
}

// modelNames lists models for messages.
func (l *live) modelNames() string { return strings.Join(l.models, ", ") }
