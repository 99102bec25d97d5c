package gateway

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/config"
)

// Resolver looks up the addresses of a name, and the names of an address (reverse, PTR),
// for replicas_from: net.DefaultResolver, or a net.Resolver a test points at its own DNS
// server.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// startDiscovery starts the DNS discovery of a pool whose model names replicas_from: every
// `every`, the name is resolved and the pool's discovered replicas become its addresses
// (docs/design.md §6). Nothing starts before Start; a reload stops and restarts it.
func (s *Server) startDiscovery(p *pool, cfg *config.Config) {
	if s.backgroundCtx == nil {
		return
	}
	var d *config.Discovery
	for _, m := range cfg.Models {
		if m.Name == p.b.Model {
			d = m.ReplicasFrom
		}
	}
	p.mu.Lock()
	if p.discovery != nil {
		p.discovery()
		p.discovery = nil
	}
	if d == nil {
		p.mu.Unlock()
		p.reconcile(s, "dns", nil, false) // discovery removed: its replicas drain
		return
	}
	ctx, cancel := context.WithCancel(s.backgroundCtx)
	p.discovery = cancel
	p.mu.Unlock()
	key, _ := discoveryKey(cfg, p.b.Model)
	spec := *d
	s.goBackground(func() {
		s.discover(ctx, p, spec, key)
		t := time.NewTicker(spec.Every.D())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.discover(ctx, p, spec, key)
			}
		}
	})
}

// discoveryKey is the engine key of a model's discovered replicas: the model's own.
func discoveryKey(cfg *config.Config, model string) (string, error) {
	for _, m := range cfg.Models {
		if m.Name == model {
			m.Replicas = append([]config.Replica{{}}, m.Replicas...) // a replica with no key of its own
			return engineKey(m, 0, "models.replicas[0]")
		}
	}
	return "", nil
}

// discover resolves the name once and reconciles the pool's discovered replicas, named as
// replicas_from.name_template says (discoverynames.go). A failed lookup changes nothing: a
// DNS hiccup must not drain a healthy pool.
func (s *Server) discover(ctx context.Context, p *pool, d config.Discovery, key string) {
	lctx, cancel := context.WithTimeout(ctx, d.Every.D())
	defer cancel()
	addrs, err := s.resolver.LookupHost(lctx, d.DNS)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("replica discovery failed; keeping the replicas as they are", "model", p.b.Model, "dns", d.DNS, "err", err)
		}
		return
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			ips = append(ips, ip)
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	names := s.nameReplicas(lctx, p, d, ips)
	var specs []replicaSpec
	for _, ip := range ips {
		host := net.JoinHostPort(ip.String(), strconv.Itoa(d.Port))
		specs = append(specs, replicaSpec{key: key, Replica: config.Replica{Name: names[ip], URL: d.Scheme + "://" + host,
			Priority: d.Priority, Fingerprint: d.Fingerprint, Engine: d.Engine, Agent: d.Agent}})
	}
	slices.SortFunc(specs, func(a, b replicaSpec) int { return strings.Compare(a.Name, b.Name) })
	p.reconcile(s, "dns", specs, false)
}
