package gateway_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/sim"
)

// replicaNames lists the replicas /readyz shows, sorted.
func (e *env) replicaNames() []string {
	var out []string
	for _, p := range e.readyz()["models"].([]any) {
		for _, r := range p.(map[string]any)["replicas"].([]any) {
			out = append(out, r.(map[string]any)["name"].(string))
		}
	}
	slices.Sort(out)
	return out
}

// Replicas discovered in DNS take their names from their reverse (PTR) names with
// name_template: "{pod}", as a StatefulSet's pods behind a headless Service have in
// Kubernetes' DNS, through a real resolver asking a DNS server on loopback. The names are
// the journal's, the metrics' and /readyz's, and they hold when a pod comes back with
// another address (the replica moves: it waits for a probe, then serves from there), when
// its reverse name is briefly missing, and when two addresses claim one name.
func TestReplicaNamesFromReverseDNS(t *testing.T) {
	const service = "engines.test."
	first := startSim(t, sim.Config{Name: "first", Addr: "127.0.0.21:0"})
	port := strings.TrimPrefix(first.URL(), "http://127.0.0.21:")
	second := startSim(t, sim.Config{Name: "second", Addr: "127.0.0.22:" + port})
	dns := startDNS(t, service)
	dns.setA(service, "127.0.0.21", "127.0.0.22")
	dns.setPTR("127.0.0.21", "vllm-0.engines.test.")
	dns.setPTR("127.0.0.22", "vllm-1.engines.test.")
	yaml := fmt.Sprintf("store: \"memory:\"\nmodels:\n  - name: sim-model\n    replicas_from: {dns: %q, port: %s, every: 100ms, name_template: \"{pod}\"}\n", service, port)
	g := newFileGateway(t, yaml, gateway.Options{Resolver: dns.resolver()})
	dns.settled(t)
	g.refresh()
	if names := g.replicaNames(); !slices.Equal(names, []string{"vllm-0", "vllm-1"}) {
		t.Fatalf("replicas %v, want vllm-0 and vllm-1", names)
	}
	for _, name := range []string{"vllm-0", "vllm-1"} {
		if state, reason := g.replicaState(name); state != "healthy" {
			t.Fatalf("%s: %s (%s)", name, state, reason)
		}
	}
	// Each name is its own engine: with the other held out, a request runs on the engine at
	// the name's address, and the journal and the metrics name it so.
	servedBy := func(name, other string, want *sim.Server) {
		t.Helper()
		g.setReplica(other, "dead")
		r := g.stream(testCtx(t), chatParams("by name", 2))
		g.setReplica(other, "active")
		if r.err != nil {
			t.Fatal(r.err)
		}
		rec := g.record(r.requestID)
		if len(rec.Attempts) != 1 || rec.Attempts[0].Replica != name || len(g.simRequests(slices.Index(g.sims, want), r.requestID)) != 1 {
			t.Fatalf("a request for %s: attempts %+v", name, rec.Attempts)
		}
	}
	g.sims = []*sim.Server{first, second}
	servedBy("vllm-0", "vllm-1", first)
	servedBy("vllm-1", "vllm-0", second)
	metrics := g.metrics()
	for _, name := range []string{"vllm-0", "vllm-1"} {
		if !strings.Contains(metrics, `fencegate_attempts_total{end="completed",model="sim-model",replica="`+name+`"} 1`) {
			t.Errorf("no attempt of %s in the metrics", name)
		}
	}

	// vllm-1 comes back with another address: the same replica, moved; it serves once its
	// probe passes, from there.
	third := startSim(t, sim.Config{Name: "third", Addr: "127.0.0.23:" + port})
	dns.setA(service, "127.0.0.21", "127.0.0.23")
	dns.setPTR("127.0.0.23", "vllm-1.engines.test.")
	dns.settled(t)
	if names := g.replicaNames(); !slices.Equal(names, []string{"vllm-0", "vllm-1"}) {
		t.Fatalf("after vllm-1 moved: replicas %v", names)
	}
	moved := g.replicaOf("vllm-1")
	if moved["url"] != "http://127.0.0.23:"+port || moved["state"] != "unhealthy" {
		t.Fatalf("vllm-1 after it moved, before a probe: %v %v", moved["url"], moved["state"])
	}
	g.refresh()
	if state, reason := g.replicaState("vllm-1"); state != "healthy" {
		t.Fatalf("vllm-1 after its probe: %s (%s)", state, reason)
	}
	g.sims = append(g.sims, third)
	servedBy("vllm-1", "vllm-0", third)

	// vllm-0's reverse name is missing for a while: it keeps its name. An address that
	// claims vllm-1 as well is told apart by its address; vllm-1 keeps its own.
	dns.setPTR("127.0.0.21", "")
	dns.setA(service, "127.0.0.21", "127.0.0.23", "127.0.0.24")
	dns.setPTR("127.0.0.24", "vllm-1.engines.test.")
	dns.settled(t)
	want := []string{"vllm-0", "vllm-1", "vllm-1@127.0.0.24:" + port}
	if names := g.replicaNames(); !slices.Equal(names, want) {
		t.Fatalf("replicas %v, want %v", names, want)
	}
	if u := g.replicaOf("vllm-1")["url"]; u != "http://127.0.0.23:"+port {
		t.Fatalf("vllm-1 at %v after another address claimed its name", u)
	}
}
