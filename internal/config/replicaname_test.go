package config

import (
	"net/netip"
	"strings"
	"testing"
)

// A name template names each discovered replica from its address, its port and its reverse
// name; a template that could not tell replicas apart, or says what no one knows, is
// refused at load, naming the field.
func TestReplicaNameTemplate(t *testing.T) {
	ip := netip.MustParseAddr("10.1.2.3")
	ptr := "vllm-0.vllm-engines.llm.svc.cluster.local."
	for tmpl, want := range map[string]string{
		"":                 "10.1.2.3:8001",
		"{ip}:{port}":      "10.1.2.3:8001",
		"{pod}":            "vllm-0",
		"{host}":           "vllm-0.vllm-engines.llm.svc.cluster.local",
		"gpu/{pod}:{port}": "gpu/vllm-0:8001",
		"{pod}-{ip}":       "vllm-0-10.1.2.3",
	} {
		d := Discovery{DNS: "vllm-engines", Port: 8001, NameTemplate: tmpl}
		if got := d.ReplicaName(ip, ptr); got != want {
			t.Errorf("template %q: %q, want %q", tmpl, got, want)
		}
		if d.NeedsReverseLookup() != (strings.Contains(tmpl, "{pod}") || strings.Contains(tmpl, "{host}")) {
			t.Errorf("template %q: NeedsReverseLookup %v", tmpl, d.NeedsReverseLookup())
		}
	}
	if got := (Discovery{Port: 8001}).AddressName(netip.MustParseAddr("fd00::1")); got != "[fd00::1]:8001" {
		t.Errorf("an IPv6 address name: %q", got)
	}
	base := "models:\n  - name: m\n    replicas_from: {dns: vllm-engines, port: 8001, name_template: %q}\n"
	for tmpl, want := range map[string]string{
		"{name}": "unknown placeholder {name}",
		"vllm":   "names every replica alike",
		"{port}": "names every replica alike",
		"{pod":   "'{' without its '}'",
		"pod}":   "'}' without its '{'",
	} {
		_, err := Parse([]byte(strings.Replace(base, "%q", `"`+tmpl+`"`, 1)))
		if err == nil || !strings.Contains(err.Error(), "models[0].replicas_from.name_template") || !strings.Contains(err.Error(), want) {
			t.Errorf("template %q: %v, want %q", tmpl, err, want)
		}
	}
	if _, err := Parse([]byte(strings.Replace(base, "%q", `"{pod}"`, 1))); err != nil {
		t.Errorf("template {pod}: %v", err)
	}
}
