package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultNameTemplate names a discovered replica by its address, as before name templates.
const DefaultNameTemplate = "{ip}:{port}"

// namePlaceholders are what a replicas_from name_template may say:
//
//	{ip}    the address, as DNS gave it
//	{port}  replicas_from.port
//	{host}  the address's reverse (PTR) name, without the trailing dot
//	{pod}   the first label of that name: in Kubernetes the pod's hostname for the pods of
//	        a StatefulSet (or pods with hostname and subdomain) behind a headless Service,
//	        the address with dashes for other pods
var namePlaceholders = []string{"{ip}", "{port}", "{host}", "{pod}"}

// validateNameTemplate refuses a template with an unknown placeholder, a stray brace, or
// nothing that tells one replica from another.
func validateNameTemplate(t, field string) error {
	rest := t
	distinct := false
	for {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			break
		}
		if rest[i] == '}' {
			return fmt.Errorf("%s: %q has a '}' without its '{'", field, t)
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("%s: %q has a '{' without its '}'", field, t)
		}
		ph := rest[i : i+j+1]
		known := false
		for _, p := range namePlaceholders {
			known = known || p == ph
		}
		if !known {
			return fmt.Errorf("%s: %q: unknown placeholder %s (known: %s)", field, t, ph, strings.Join(namePlaceholders, ", "))
		}
		distinct = distinct || ph != "{port}"
		rest = rest[i+j+1:]
	}
	if !distinct {
		return fmt.Errorf("%s: %q names every replica alike; use {ip}, {host} or {pod}", field, t)
	}
	return nil
}

// NeedsReverseLookup reports whether the name template asks for the address's PTR name.
func (d Discovery) NeedsReverseLookup() bool {
	t := d.nameTemplate()
	return strings.Contains(t, "{host}") || strings.Contains(t, "{pod}")
}

func (d Discovery) nameTemplate() string {
	if d.NameTemplate == "" {
		return DefaultNameTemplate
	}
	return d.NameTemplate
}

// ReplicaName is the name of the replica at ip, whose reverse name is host (a PTR answer,
// trailing dot or not; "" when the template needs none).
func (d Discovery) ReplicaName(ip netip.Addr, host string) string {
	host = strings.TrimSuffix(host, ".")
	pod, _, _ := strings.Cut(host, ".")
	return strings.NewReplacer("{ip}", ip.String(), "{port}", strconv.Itoa(d.Port), "{host}", host, "{pod}", pod).
		Replace(d.nameTemplate())
}

// AddressName is the name of the replica at ip by its address alone, the default template's:
// what a replica is called whose reverse name cannot be found.
func (d Discovery) AddressName(ip netip.Addr) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(d.Port))
}
