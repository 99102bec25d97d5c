package gateway

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
)

// nameReplicas names the addresses one discovery round found, as the name template says.
// Names are what metrics, logs and the journal know a replica by, so they are kept stable:
//
//   - an address whose reverse name cannot be found now keeps the name it had in the last
//     round (a DNS hiccup must not rename a replica, which would drain it and make it join
//     again); an address never named before is named by its address, and says so;
//   - when two addresses come to one name (a pod replaced while its old address is still
//     listed), or a discovered name is a listed replica's, the address that had the name
//     keeps it and the others are told apart by their address ("name@ip:port").
func (s *Server) nameReplicas(ctx context.Context, p *pool, d config.Discovery, ips []netip.Addr) map[netip.Addr]string {
	p.mu.Lock()
	prev := maps.Clone(p.dnsNames)
	taken := p.namesNotFrom("dns")
	p.mu.Unlock()
	want := make(map[netip.Addr]string, len(ips))
	for _, ip := range ips {
		if !d.NeedsReverseLookup() {
			want[ip] = d.ReplicaName(ip, "")
			continue
		}
		host, err := s.reverseName(ctx, d, ip)
		switch {
		case err == nil:
			want[ip] = d.ReplicaName(ip, host)
		case prev[ip] != "":
			want[ip] = prev[ip]
		default:
			want[ip] = d.AddressName(ip)
			if ctx.Err() == nil {
				s.log.Warn("no reverse DNS name for a discovered replica; naming it by its address until there is one",
					"model", p.b.Model, "address", ip.String(), "name_template", d.NameTemplate, "err", err)
			}
		}
	}
	names := make(map[netip.Addr]string, len(ips))
	owner := make(map[string]bool, len(ips))
	for _, ip := range ips { // the names addresses keep from the last round first
		if n := want[ip]; prev[ip] == n && !taken[n] && !owner[n] {
			names[ip], owner[n] = n, true
		}
	}
	for _, ip := range ips {
		if _, ok := names[ip]; ok {
			continue
		}
		n := want[ip]
		if owner[n] || taken[n] {
			n += "@" + d.AddressName(ip)
		}
		names[ip], owner[n] = n, true
	}
	p.mu.Lock()
	p.dnsNames = names
	p.mu.Unlock()
	return names
}

// reverseName is the address's PTR name. A pod behind several Services has one per Service
// in Kubernetes' DNS: the one under the Service discovered is preferred.
func (s *Server) reverseName(ctx context.Context, d config.Discovery, ip netip.Addr) (string, error) {
	names, err := s.resolver.LookupAddr(ctx, ip.String())
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", errors.New("no PTR record")
	}
	slices.Sort(names)
	service, _, _ := strings.Cut(strings.TrimSuffix(d.DNS, "."), ".")
	for _, n := range names {
		if _, rest, ok := strings.Cut(n, "."); ok && strings.HasPrefix(rest, service+".") {
			return n, nil
		}
	}
	return names[0], nil
}
