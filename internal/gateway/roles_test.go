package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/tidwall/gjson"
)

// The keys of the role tests: two tenants and an operator.
const (
	roleKeyA     = "tenant-a-key-0123456789"
	roleKeyB     = "tenant-b-key-0123456789"
	roleKeyAdmin = "operator-key-0123456789"
)

// roleCallers are the callers of the table, in the order of its rows' statuses.
var roleCallers = []struct{ name, key string }{
	{"no key", ""}, {"tenant A", roleKeyA}, {"tenant B", roleKeyB}, {"admin", roleKeyAdmin},
}

// roleGateway is a gateway started from a file (so that /admin/reload has one to read),
// its public handler on loopback, the same handler behind a server that makes every client
// look remote, and its admin handler.
type roleGateway struct {
	gw                    *gateway.Server
	public, remote, admin *httptest.Server
	log                   *syncBuffer
}

// startRoleGateway serves a model per simulated replica, and the models of extraModels (YAML
// list items) after them.
func startRoleGateway(t *testing.T, sims []*sim.Server, yaml string, st store.Store, extraModels ...string) *roleGateway {
	t.Helper()
	var b strings.Builder
	b.WriteString(yaml)
	b.WriteString("store: \"memory:\"\ntraces: {mode: all}\nmodels:\n")
	for _, s := range sims {
		model := "sim-model"
		if strings.HasPrefix(s.Name(), "embed") {
			model = "embed-model"
		}
		fmt.Fprintf(&b, "  - name: %s\n    replicas: [{url: %q, name: %s}]\n", model, s.URL(), s.Name())
	}
	for _, m := range extraModels {
		b.WriteString(m)
	}
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &roleGateway{log: &syncBuffer{}}
	g.gw, err = gateway.New(context.Background(), cfg, gateway.Options{ConfigPath: path, Store: st,
		Logger: slog.New(slog.NewTextHandler(g.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	g.gw.Start()
	h := g.gw.Handler()
	g.public = h1servertest.NewServer(h)
	// A client of another host, as the gateway sees it: the address is all that differs.
	g.remote = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "203.0.113.7:40000"
		h.ServeHTTP(w, r)
	}))
	g.admin = h1servertest.NewServer(g.gw.AdminHandler())
	t.Cleanup(func() { g.public.Close(); g.remote.Close(); g.admin.Close(); g.gw.Close() })
	return g
}

// simReplicas is where /readyz lists sim-model's replicas (when it lists them).
const simReplicas = `models.#(model=="sim-model").replicas`

// roleSims are a generation model's replica and an embedding model's.
func roleSims(t *testing.T) []*sim.Server {
	return []*sim.Server{startSim(t, sim.Config{Name: "sim-1", Model: "sim-model"}),
		startSim(t, sim.Config{Name: "embed-1", Model: "embed-model", Task: sim.TaskEmbed})}
}

const roleKeysYAML = `auth:
  keys: [{id: team-a, key: "` + roleKeyA + `"}, {id: team-b, key: "` + roleKeyB + `"}]
  admin_keys: [{id: ops, key: "` + roleKeyAdmin + `"}]
`

// roleCall is how the table calls a route: method, path (the id of a request tenant A
// made, where the route names one) and body.
func roleCall(pattern, requestID string) (method, path, body string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "GET", pattern
	}
	path = strings.NewReplacer("{id}", requestID, "{model}", "sim-model", "{replica}", "sim-1", "{$}", "").Replace(path)
	switch path {
	case "/v1/chat/completions":
		body = chatFor("sim-model", 2)
	case "/v1/completions":
		body = `{"model":"sim-model","prompt":"hello","max_tokens":2}`
	case "/v1/messages":
		body = `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}`
	case "/v1/responses":
		body = `{"model":"sim-model","input":"hello","max_output_tokens":2}`
	case "/v1/embeddings":
		body = `{"model":"embed-model","input":"hello"}`
	case "/admin/replicas/sim-model/sim-1":
		body = `{"state":"active"}`
	case "/debug/pprof/profile":
		path += "?seconds=1"
	case "/debug/pprof/trace":
		path += "?seconds=0.01"
	}
	if strings.HasPrefix(path, "/v1/requests/") || strings.HasPrefix(path, "/admin/requests/") || strings.HasPrefix(path, "/ui/requests/") {
		path += "?wait=10s" // the request's record and trace are written after it ends
	}
	return method, path, body
}

// Who may call what, for every route: the expected status for each caller (no key, tenant
// A, tenant B, admin) on the shared listener (no admin_listen; from loopback and from
// another host alike: the client's address proves nothing), on the public listener beside
// an admin listener, and on a loopback admin listener. A route the table does not list
// fails the test, so none is added without deciding who may call it.
func TestWhoMayCallWhat(t *testing.T) {
	type cells struct{ shared, api, admin [4]int }
	var (
		api      = cells{shared: [4]int{401, 200, 200, 200}, api: [4]int{401, 200, 200, 200}, admin: [4]int{404, 404, 404, 404}}
		own      = cells{shared: [4]int{401, 200, 404, 200}, api: [4]int{401, 200, 404, 200}, admin: [4]int{404, 404, 404, 404}}
		probe    = cells{shared: [4]int{200, 200, 200, 200}, api: [4]int{404, 404, 404, 404}, admin: [4]int{200, 200, 200, 200}}
		operator = cells{shared: [4]int{401, 403, 403, 200}, api: [4]int{404, 404, 404, 404}, admin: [4]int{200, 200, 200, 200}}
		pprof    = cells{shared: [4]int{404, 404, 404, 404}, api: [4]int{404, 404, 404, 404}, admin: [4]int{200, 200, 200, 200}}
	)
	table := map[string]cells{
		"POST /v1/chat/completions":              api,
		"POST /v1/completions":                   api,
		"POST /v1/messages":                      api,
		"POST /v1/responses":                     api,
		"POST /v1/embeddings":                    api,
		"GET /v1/models":                         api,
		"GET /v1/requests/{id}":                  own,
		"GET /healthz":                           {shared: [4]int{200, 200, 200, 200}, api: [4]int{200, 200, 200, 200}, admin: [4]int{200, 200, 200, 200}},
		"GET /readyz":                            probe,
		"GET /metrics":                           operator,
		"POST /admin/replicas/{model}/{replica}": operator,
		"POST /admin/refresh":                    operator,
		"POST /admin/reload":                     operator,
		"GET /admin/requests/{id}/trace":         operator,
		"GET /ui/{$}":                            operator,
		"GET /ui/requests":                       operator,
		"GET /ui/requests/{id}":                  operator,
		"GET /ui/requests/{id}/trace":            operator,
		"/debug/pprof/":                          pprof,
		"/debug/pprof/cmdline":                   pprof,
		"/debug/pprof/profile":                   pprof,
		"/debug/pprof/symbol":                    pprof,
		"/debug/pprof/trace":                     pprof,
	}

	sims := roleSims(t)
	shared := startRoleGateway(t, sims, roleKeysYAML, nil)
	split := startRoleGateway(t, sims, roleKeysYAML+"admin_listen: 127.0.0.1:0\n", nil)
	for _, p := range shared.gw.RoutePatterns() {
		if _, ok := table[p]; !ok {
			t.Errorf("route %q is not in the table: decide who may call it", p)
		}
	}
	for p := range table {
		if !slices.Contains(shared.gw.RoutePatterns(), p) {
			t.Errorf("the table lists %q, which the gateway does not serve", p)
		}
	}

	// A request of tenant A on each gateway, whose record and trace the table reads.
	idOf := func(url string) string {
		a := send(t, "POST", url+"/v1/chat/completions", roleKeyA, chatFor("sim-model", 2))
		if a.status != 200 {
			t.Fatalf("tenant A's request: %d %s", a.status, a.body)
		}
		return a.header.Get("X-Request-Id")
	}
	sharedID, splitID := idOf(shared.public.URL), idOf(split.public.URL)

	check := func(where, url, pattern, id string, want [4]int) {
		t.Helper()
		method, path, body := roleCall(pattern, id)
		for i, c := range roleCallers {
			a := send(t, method, url+path, c.key, body)
			if a.status != want[i] {
				t.Errorf("%s: %s %s by %s: %d, want %d (%.200s)", where, method, path, c.name, a.status, want[i], a.body)
				continue
			}
			if a.status >= 400 && !gjson.Get(a.body, "error.message").Exists() {
				t.Errorf("%s: %s %s by %s: %d is not an API error: %.200s", where, method, path, c.name, a.status, a.body)
			}
			switch {
			case a.status == 401 && gjson.Get(a.body, "error.code").String() != "invalid_api_key":
				t.Errorf("%s: %s %s by %s: 401 with code %q, want invalid_api_key", where, method, path, c.name, gjson.Get(a.body, "error.code"))
			case a.status == 403 && gjson.Get(a.body, "error.code").String() != "admin_only":
				t.Errorf("%s: %s %s by %s: 403 with code %q, want admin_only", where, method, path, c.name, gjson.Get(a.body, "error.code"))
			}
			if pattern == "GET /readyz" && a.status == 200 {
				// The replicas' detail (their URLs among it) to an admin and on the admin
				// listener; to anyone else, what is ready.
				detail := where == "admin listener" || c.key == roleKeyAdmin
				if got := gjson.Get(a.body, simReplicas).Exists(); got != detail || (!detail && strings.Contains(a.body, sims[0].URL())) {
					t.Errorf("%s: /readyz by %s: replicas' detail shown %v, want %v: %s", where, c.name, got, detail, a.body)
				}
				if !gjson.Get(a.body, "ready").Bool() || gjson.Get(a.body, `models.#(model=="sim-model").available`).Int() != 1 {
					t.Errorf("%s: /readyz by %s: %s", where, c.name, a.body)
				}
			}
		}
	}
	for _, p := range shared.gw.RoutePatterns() {
		c := table[p]
		check("shared listener from loopback", shared.public.URL, p, sharedID, c.shared)
		check("shared listener from another host", shared.remote.URL, p, sharedID, c.shared)
		check("public listener beside admin_listen", split.public.URL, p, splitID, c.api)
		check("admin listener", split.admin.URL, p, splitID, c.admin)
	}
	// A tenant key refused on an admin path is logged with its id.
	if log := shared.log.String(); !strings.Contains(log, "a tenant key was refused on an admin path") || !strings.Contains(log, "key_id=team-b") {
		t.Errorf("the refused tenant keys are not logged with their ids:\n%.2000s", log)
	}
}

// With no admin key and no admin listener, the operator's calls are off — for a loopback
// client and whatever key it sends — with a message that says how to turn them on;
// /metrics too, unless metrics.public is set. An admin key created in the store turns them
// on for that key alone.
func TestAdminCallsOffWithoutAdminKey(t *testing.T) {
	sims := roleSims(t)
	for _, yaml := range []string{"", "auth:\n  keys: [{id: team-a, key: \"" + roleKeyA + "\"}]\n"} {
		st := store.NewMemory()
		g := startRoleGateway(t, sims, yaml, st)
		tenant := ""
		if yaml != "" {
			tenant = roleKeyA
		}
		for _, r := range []struct{ method, path string }{{"POST", "/admin/refresh"}, {"POST", "/admin/reload"}, {"GET", "/metrics"},
			{"POST", "/admin/replicas/sim-model/sim-1"}, {"GET", "/admin/requests/req_01J00000000000000000000000/trace"}, {"GET", "/ui/"}} {
			a := send(t, r.method, g.public.URL+r.path, "", `{"state":"dead"}`)
			msg := gjson.Get(a.body, "error.message").String()
			if a.status != 403 || gjson.Get(a.body, "error.code").String() != "admin_disabled" ||
				!strings.Contains(msg, "auth.admin_keys") || !strings.Contains(msg, "fencegate keys create --admin") || !strings.Contains(msg, "admin_listen") {
				t.Errorf("keys %q: %s %s from loopback, no admin key anywhere: %d %s", yaml, r.method, r.path, a.status, a.body)
			}
			if r.path == "/metrics" && !strings.Contains(msg, "metrics.public") {
				t.Errorf("/metrics refused without saying metrics.public: %s", msg)
			}
			if tenant != "" {
				if a := send(t, r.method, g.public.URL+r.path, tenant, `{"state":"dead"}`); a.status != 403 || gjson.Get(a.body, "error.code").String() != "admin_only" {
					t.Errorf("%s %s with a tenant key: %d %s", r.method, r.path, a.status, a.body)
				}
			}
		}
		if a := send(t, "GET", g.public.URL+"/readyz", "", ""); a.status != 200 || gjson.Get(a.body, simReplicas).Exists() {
			t.Errorf("/readyz to anyone: %d %s", a.status, a.body)
		}
		if a := send(t, "POST", g.public.URL+"/v1/chat/completions", tenant, chatFor("sim-model", 2)); a.status != 200 {
			t.Errorf("the API beside the closed admin calls: %d %s", a.status, a.body)
		}

		createStoreKey(t, st, store.APIKey{ID: "ops", Admin: true}, roleKeyAdmin)
		if err := g.gw.RefreshKeys(t.Context()); err != nil {
			t.Fatal(err)
		}
		if a := send(t, "POST", g.public.URL+"/admin/refresh", roleKeyAdmin, ""); a.status != 200 || !gjson.Get(a.body, simReplicas).Exists() {
			t.Errorf("keys %q: /admin/refresh with a stored admin key: %d %s", yaml, a.status, a.body)
		}
		if a := send(t, "POST", g.public.URL+"/admin/refresh", "", ""); a.status != 401 {
			t.Errorf("keys %q: /admin/refresh without a key once an admin key exists: %d %s", yaml, a.status, a.body)
		}
		if a := send(t, "GET", g.public.URL+"/readyz", roleKeyAdmin, ""); !gjson.Get(a.body, simReplicas).Exists() {
			t.Errorf("/readyz to a stored admin key has no detail: %s", a.body)
		}
	}

	public := startRoleGateway(t, sims, "metrics: {public: true}\n", nil)
	if a := send(t, "GET", public.public.URL+"/metrics", "", ""); a.status != 200 || !strings.Contains(a.body, "fencegate_model_available_replicas") {
		t.Errorf("/metrics with metrics.public: %d %.300s", a.status, a.body)
	}
	if a := send(t, "POST", public.public.URL+"/admin/refresh", "", ""); a.status != 403 {
		t.Errorf("metrics.public opened /admin/refresh: %d", a.status)
	}
}
