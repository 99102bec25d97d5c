package gateway

import (
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/internal/balance"
)

// announce logs, after a probe round, each replica of p the first time it is found healthy
// (its engine kind, version and the weights it reports), so that an operator starting a
// gateway sees what it found; and, once until one comes back, that the pool has no healthy
// replica, with each one's reason: its requests are answered 503 no_healthy_replica
// meanwhile, while /readyz stays 200 (docs/design.md §2).
func (s *Server) announce(p *pool) {
	now := s.now()
	type found struct{ name, url, kind, version, weights string }
	var healthy []found
	var out []string
	p.mu.Lock()
	anyHealthy := false
	for _, r := range p.b.Replicas {
		m := p.members[r.Name]
		if m == nil || m.removed {
			continue
		}
		st := r.StateAt(now, p.b.Limits)
		if st != balance.Healthy {
			out = append(out, fmt.Sprintf("%s: %s (%s)", r.Name, st, r.ReasonAt(now)))
			continue
		}
		anyHealthy = true
		if !m.announced {
			m.announced = true
			f := found{name: r.Name, url: r.URL, kind: m.engineKind(), weights: r.Fingerprint["model"]}
			if m.facts != nil {
				f.version = m.facts.version
			}
			healthy = append(healthy, f)
		}
	}
	noneWas := p.noneAnnounced
	p.noneAnnounced = !anyHealthy && len(out) > 0
	p.mu.Unlock()
	for _, f := range healthy {
		kind := f.kind
		if kind == "" {
			kind = "unknown (no engine metrics; set engine:)"
		}
		s.log.Info("replica found healthy", "model", p.b.Model, "replica", f.name, "url", f.url,
			"engine", kind, "engine_version", f.version, "weights", f.weights)
	}
	if !anyHealthy && len(out) > 0 && !noneWas {
		s.log.Warn("no healthy replica: the model's requests get 503 no_healthy_replica until one is", "model", p.b.Model,
			"replicas", strings.Join(out, "; "))
	}
}
