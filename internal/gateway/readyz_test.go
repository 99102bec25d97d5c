package gateway_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/tidwall/gjson"
)

// closedURL is the URL of a port on loopback that nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// One model whose every replica is down does not take the gateway out of service: /readyz
// stays 200 (a Service keeps sending the other models' clients), says which model has no
// replica, and so does the metric; that model's requests get their own 503
// no_healthy_replica with Retry-After, and the other model's are served.
func TestReadyWhileOneModelIsDown(t *testing.T) {
	up := startSim(t, sim.Config{Name: "sim-1", Model: "sim-model"})
	down := fmt.Sprintf("  - name: down-model\n    replicas: [{url: %q, name: gone-1}]\n", closedURL(t))
	g := startRoleGateway(t, []*sim.Server{up}, "admin_listen: 127.0.0.1:0\n", nil, down)

	for _, url := range []string{g.public.URL, g.admin.URL} {
		a := send(t, "GET", url+"/readyz", "", "")
		if url == g.public.URL {
			if a.status != 404 { // beside admin_listen, /readyz is the admin listener's
				t.Errorf("public /readyz beside admin_listen: %d", a.status)
			}
			continue
		}
		if a.status != 200 || !gjson.Get(a.body, "ready").Bool() ||
			gjson.Get(a.body, `models.#(model=="down-model").available`).Int() != 0 ||
			gjson.Get(a.body, `models.#(model=="sim-model").available`).Int() != 1 {
			t.Errorf("/readyz with one model down: %d %s", a.status, a.body)
		}
	}
	a := send(t, "POST", g.public.URL+"/v1/chat/completions", "", chatFor("down-model", 2))
	if a.status != 503 || gjson.Get(a.body, "error.code").String() != "no_healthy_replica" || a.header.Get("Retry-After") == "" {
		t.Errorf("a request for the model that is down: %d Retry-After %q %s", a.status, a.header.Get("Retry-After"), a.body)
	}
	if a := send(t, "POST", g.public.URL+"/v1/chat/completions", "", chatFor("sim-model", 2)); a.status != 200 {
		t.Errorf("a request for the model that is up: %d %s", a.status, a.body)
	}
	metrics := send(t, "GET", g.admin.URL+"/metrics", "", "").body
	for _, want := range []string{`fencegate_model_available_replicas{model="down-model"} 0`, `fencegate_model_available_replicas{model="sim-model"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
