package gateway_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/limits/redistest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/tidwall/gjson"
)

// Many teams on one gateway: keys kept in the store, keys limited to models, and per-key
// limits, on one gateway and across gateways sharing a store and a Redis.

// ended collects the access-log lines of finished requests, so a test can wait for a
// request's handler to have returned (its limits released) instead of sleeping.
type ended struct {
	mu   sync.Mutex
	ids  map[string]chan struct{}
	next slog.Handler
}

func newEnded() *ended { return &ended{ids: map[string]chan struct{}{}} }

func (e *ended) ch(id string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.ids[id]
	if c == nil {
		c = make(chan struct{})
		e.ids[id] = c
	}
	return c
}

// wait blocks until request id's access line was written.
func (e *ended) wait(t *testing.T, id string) {
	t.Helper()
	select {
	case <-e.ch(id):
	case <-time.After(20 * time.Second):
		t.Fatalf("request %s never ended", id)
	}
}

func (e *ended) Enabled(context.Context, slog.Level) bool { return true }
func (e *ended) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "request_id" {
			close(e.ch(a.Value.String()))
			return false
		}
		return true
	})
	return nil
}
func (e *ended) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *ended) WithGroup(string) slog.Handler      { return e }

// tenantGW is one gateway of a tenants test.
type tenantGW struct {
	gw  *gateway.Server
	url string
	// adminURL serves the gateway's AdminHandler.
	adminURL string
	ended    *ended
}

type tenantOptions struct {
	sims   []*sim.Server
	store  store.Store
	config func(c *config.Config)
	now    func() time.Time
	admin  bool // serve AdminHandler instead of Handler
}

func startTenantGW(t *testing.T, o tenantOptions) *tenantGW {
	t.Helper()
	var reps []config.Replica
	for i, s := range o.sims {
		reps = append(reps, config.Replica{Name: fmt.Sprintf("sim-%d", i+1), URL: s.URL()})
	}
	cfg := &config.Config{Models: []config.Model{{Name: "sim-model", Replicas: reps}, {Name: "other-model", Replicas: reps}}, Store: "memory:"}
	if o.config != nil {
		o.config(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := newEnded()
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{Store: o.store, Now: o.now, Logger: slog.New(e)})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	h := gw.Handler()
	if o.admin {
		h = gw.AdminHandler()
	}
	srv := h1servertest.NewServer(h)
	adminSrv := h1servertest.NewServer(gw.AdminHandler())
	t.Cleanup(func() {
		srv.Close()
		adminSrv.Close()
		gw.Close()
	})
	return &tenantGW{gw: gw, url: srv.URL, adminURL: adminSrv.URL, ended: e}
}

func startSims(t *testing.T, n int) []*sim.Server {
	t.Helper()
	var out []*sim.Server
	for i := range n {
		s, err := sim.Start(sim.Config{Name: fmt.Sprintf("sim-%d", i+1), Model: "sim-model"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// answer is one HTTP answer as a test reads it.
type answer struct {
	status int
	header http.Header
	body   string
}

var tenantClient = &http.Client{Transport: &http.Transport{}}

func send(t *testing.T, method, url, key, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tenantClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func chatFor(model string, maxTokens int) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":%d,"ignore_eos":true,"messages":[{"role":"user","content":"hello"}]}`, model, maxTokens)
}

func createStoreKey(t *testing.T, st store.Store, k store.APIKey, secret string) {
	t.Helper()
	k.KeySHA256, k.CreatedAt = sha256Hex(secret), time.Now()
	if err := st.CreateKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
}

// A key kept in the store works on every gateway sharing the store; once revoked on one,
// every gateway refuses it after its next read of the keys. Revoking every key never opens
// the gateway. Configured keys may be written as their hash.
func TestStoredKeysAcrossGateways(t *testing.T) {
	sims := startSims(t, 1)
	st := store.NewMemory()
	t.Cleanup(func() { st.Close() })
	cfgKey := "configured-key-0123456789"
	withHash := func(c *config.Config) {
		c.Auth.Keys = []config.APIKey{{ID: "cfg", KeySHA256: sha256Hex(cfgKey)}}
	}
	gw1 := startTenantGW(t, tenantOptions{sims: sims, store: st, config: withHash})
	gw2 := startTenantGW(t, tenantOptions{sims: sims, store: st, config: withHash})
	const secret = "fg-team-a-secret-for-the-test-0123456789"
	createStoreKey(t, st, store.APIKey{ID: "team-a"}, secret)
	for i, g := range []*tenantGW{gw1, gw2} {
		// A key just created works at once: the miss reads the store.
		if a := send(t, "POST", g.url+"/v1/chat/completions", secret, chatFor("sim-model", 2)); a.status != 200 {
			t.Fatalf("gateway %d, stored key: %d %s", i+1, a.status, a.body)
		}
		if a := send(t, "POST", g.url+"/v1/chat/completions", cfgKey, chatFor("sim-model", 2)); a.status != 200 {
			t.Fatalf("gateway %d, configured key_sha256: %d %s", i+1, a.status, a.body)
		}
	}
	if err := st.RevokeKey(t.Context(), "team-a", time.Now()); err != nil {
		t.Fatal(err)
	}
	for i, g := range []*tenantGW{gw1, gw2} {
		if err := g.gw.RefreshKeys(t.Context()); err != nil {
			t.Fatal(err)
		}
		a := send(t, "POST", g.url+"/v1/chat/completions", secret, chatFor("sim-model", 2))
		if a.status != 401 || gjson.Get(a.body, "error.code").String() != "invalid_api_key" {
			t.Fatalf("gateway %d after the revocation: %d %s", i+1, a.status, a.body)
		}
	}

	// A gateway whose only key lives in the store, revoked: still closed to everyone.
	gw3 := startTenantGW(t, tenantOptions{sims: sims, store: st})
	if a := send(t, "GET", gw3.url+"/v1/models", "", ""); a.status != 401 {
		t.Fatalf("no configured key, every stored key revoked: %d, want 401", a.status)
	}
	open := startTenantGW(t, tenantOptions{sims: sims})
	if a := send(t, "GET", open.url+"/v1/models", "", ""); a.status != 200 {
		t.Fatalf("no key anywhere: %d, want 200 (an open gateway)", a.status)
	}
}

// A key limited to some models sees the others as absent: 404 model_not_found on every
// API, and not listed by GET /v1/models.
func TestKeyLimitedToModels(t *testing.T) {
	sims := startSims(t, 1)
	other, err := sim.Start(sim.Config{Name: "other", Model: "other-model"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	const limited, all = "limited-key-0123456789", "every-model-key-0123456789"
	g := startTenantGW(t, tenantOptions{sims: sims, config: func(c *config.Config) {
		c.Models[1].Replicas = []config.Replica{{Name: "other", URL: other.URL()}}
		c.Auth.Keys = []config.APIKey{{ID: "limited", Key: limited, Models: []string{"sim-model"}}, {ID: "all", Key: all}}
	}})
	for path, body := range map[string]string{
		"/v1/chat/completions": chatFor("other-model", 2),
		"/v1/messages":         `{"model":"other-model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/responses":        `{"model":"other-model","max_output_tokens":2,"input":"hi"}`,
		"/v1/completions":      `{"model":"other-model","max_tokens":2,"prompt":"hi"}`,
	} {
		denied := send(t, "POST", g.url+path, limited, body)
		unknown := send(t, "POST", g.url+path, limited, strings.Replace(body, "other-model", "no-such-model", 1))
		if denied.status != 404 || errorCode(denied.body) != "model_not_found" {
			t.Errorf("%s, a model the key may not use: %d %s", path, denied.status, denied.body)
		}
		// The same answer as for a model that does not exist, but for the name.
		if strings.ReplaceAll(denied.body, "other-model", "X") != strings.ReplaceAll(reqIDless(unknown.body), "no-such-model", "X") &&
			reqIDless(denied.body) != strings.ReplaceAll(reqIDless(unknown.body), "no-such-model", "other-model") {
			t.Errorf("%s: refused %s, unknown %s", path, denied.body, unknown.body)
		}
		if a := send(t, "POST", g.url+path, all, body); a.status != 200 {
			t.Errorf("%s with a key for every model: %d %s", path, a.status, a.body)
		}
	}
	if a := send(t, "POST", g.url+"/v1/chat/completions", limited, chatFor("sim-model", 2)); a.status != 200 {
		t.Errorf("the key's own model: %d %s", a.status, a.body)
	}
	models := func(key string) []string {
		a := send(t, "GET", g.url+"/v1/models", key, "")
		var ids []string
		for _, m := range gjson.Get(a.body, "data.#.id").Array() {
			ids = append(ids, m.String())
		}
		return ids
	}
	if got := models(limited); strings.Join(got, ",") != "sim-model" {
		t.Errorf("GET /v1/models for the limited key: %v", got)
	}
	if got := models(all); strings.Join(got, ",") != "other-model,sim-model" {
		t.Errorf("GET /v1/models for the key for every model: %v", got)
	}
}

// errorCode reads an error's code in either API shape.
func errorCode(body string) string { return gjson.Get(body, "error.code").String() }

// reqIDless drops the request id from an error body, so two answers can be compared.
func reqIDless(body string) string {
	id := gjson.Get(body, "error.request_id").String()
	return strings.ReplaceAll(body, id, "")
}

// clock is a fake clock the tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// hold starts a streaming request that hangs after its first token until the returned
// function is called; it returns once the request runs.
func hold(t *testing.T, url, key string) (id string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(streamBody("hold", 50)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Sim-Fault", "hang@sent:1")
	resp, err := tenantClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("held request: %d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Ratelimit-Limit-Requests") == "" {
		t.Errorf("a stream of a limited key without rate limit headers: %v", resp.Header)
	}
	// Its first event: the request is running.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: {") {
	}
	return resp.Header.Get("X-Request-Id"), func() {
		cancel()
		resp.Body.Close()
	}
}

// limitsCase runs the limit tests on gateways made by mk, which share their counts when
// they share a backend.
func runLimits(t *testing.T, gws []*tenantGW, clk *clock, key string) {
	t.Helper()
	gw := func(i int) *tenantGW { return gws[i%len(gws)] }

	// Concurrency 1: a second request while one runs is refused, on any gateway; once the
	// first ended, the next is admitted.
	id, stop := hold(t, gw(0).url, key)
	a := send(t, "POST", gw(1).url+"/v1/chat/completions", key, chatFor("sim-model", 2))
	if a.status != 429 || errorCode(a.body) != "concurrency_limit_exceeded" || a.header.Get("Retry-After") != "1" {
		t.Fatalf("a second request at once: %d %v %s", a.status, a.header, a.body)
	}
	stop()
	gw(0).ended.wait(t, id)

	// Requests per minute (5; the held request was the first).
	for i := 2; i <= 5; i++ {
		a := send(t, "POST", gw(i).url+"/v1/chat/completions", key, chatFor("sim-model", 1))
		if a.status != 200 {
			t.Fatalf("request %d of 5: %d %s", i, a.status, a.body)
		}
		if got := a.header.Get("X-Ratelimit-Remaining-Requests"); got != strconv.Itoa(5-i) {
			t.Errorf("request %d: remaining %q, want %d", i, got, 5-i)
		}
		gw(i).ended.wait(t, a.header.Get("X-Request-Id"))
	}
	a = send(t, "POST", gw(6).url+"/v1/messages", key, `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
	// The Messages API's own error shape, with OpenAI's headers.
	if a.status != 429 || gjson.Get(a.body, "type").String() != "error" || gjson.Get(a.body, "error.type").String() != "rate_limit_error" ||
		errorCode(a.body) != "rate_limit_exceeded" {
		t.Fatalf("the sixth request of the minute: %d %s", a.status, a.body)
	}
	if a.header.Get("X-Ratelimit-Limit-Requests") != "5" || a.header.Get("X-Ratelimit-Remaining-Requests") != "0" ||
		a.header.Get("X-Ratelimit-Reset-Requests") == "" {
		t.Errorf("headers of the refusal: %v", a.header)
	}
	// All six came at the start of a window: the next fits once the five weigh four,
	// 12 s into the next window.
	if ra := a.header.Get("Retry-After"); ra != "72" {
		t.Errorf("Retry-After %q, want 72", ra)
	}
	clk.Add(71 * time.Second)
	if a := send(t, "POST", gw(6).url+"/v1/chat/completions", key, chatFor("sim-model", 1)); a.status != 429 {
		t.Fatalf("a second before Retry-After: %d %s", a.status, a.body)
	}
	clk.Add(time.Second)
	a = send(t, "POST", gw(6).url+"/v1/chat/completions", key, chatFor("sim-model", 1))
	if a.status != 200 {
		t.Fatalf("at Retry-After: %d %s", a.status, a.body)
	}
	gw(6).ended.wait(t, a.header.Get("X-Request-Id"))
	clk.Add(2 * time.Minute) // every request has slid out

	// Output tokens per minute (100): a request that delivers 120 tokens closes the key
	// until they have slid out far enough.
	a = send(t, "POST", gw(7).url+"/v1/chat/completions", key, chatFor("sim-model", 120))
	if a.status != 200 || gjson.Get(a.body, "usage.completion_tokens").Int() != 120 {
		t.Fatalf("a long answer: %d %s", a.status, a.body)
	}
	if a.header.Get("X-Ratelimit-Limit-Tokens") != "100" || a.header.Get("X-Ratelimit-Remaining-Tokens") != "100" {
		t.Errorf("token headers before the answer counted: %v", a.header)
	}
	gw(7).ended.wait(t, a.header.Get("X-Request-Id"))
	a = send(t, "POST", gw(8).url+"/v1/responses", key, `{"model":"sim-model","max_output_tokens":1,"input":"hi"}`)
	if a.status != 429 || errorCode(a.body) != "rate_limit_exceeded" || gjson.Get(a.body, "error.type").String() != "tokens" {
		t.Fatalf("after 120 of 100 tokens: %d %s", a.status, a.body)
	}
	if a.header.Get("X-Ratelimit-Remaining-Tokens") != "0" || a.header.Get("Retry-After") == "" {
		t.Errorf("headers: %v", a.header)
	}
}

func limitedKey(c *config.Config) {
	c.Auth.Keys = []config.APIKey{{ID: "team-a", Key: "team-a-key-0123456789", MaxConcurrent: 1, RPM: 5, TPM: 100},
		{ID: "free", Key: "free-key-0123456789"}}
}

// Per-key limits on one gateway counting locally.
func TestKeyLimitsOneGateway(t *testing.T) {
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)}
	g := startTenantGW(t, tenantOptions{sims: startSims(t, 1), config: limitedKey, now: clk.Now})
	runLimits(t, []*tenantGW{g}, clk, "team-a-key-0123456789")
	// Another key is not limited by team-a's use, and gets no rate limit headers.
	a := send(t, "POST", g.url+"/v1/chat/completions", "free-key-0123456789", chatFor("sim-model", 1))
	if a.status != 200 || a.header.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Errorf("a key without limits: %d %v", a.status, a.header)
	}
	if m := metricsOf(t, g); !strings.Contains(m, `fencegate_limited_total{key_id="team-a",limit="requests"} 2`) ||
		!strings.Contains(m, "fencegate_limits_backend_up 1") {
		t.Errorf("metrics:\n%s", grepLines(m, "limit"))
	}
}

// The same limits hold across two gateways sharing Redis: the requests alternate between
// them.
func TestKeyLimitsAcrossGatewaysSharingRedis(t *testing.T) {
	u := redistest.URL(t)
	prefix := redistest.Prefix(t, u)
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)}
	sims := startSims(t, 1)
	withRedis := func(c *config.Config) {
		limitedKey(c)
		c.Limits.Backend, c.Limits.KeyPrefix = u, prefix
	}
	g1 := startTenantGW(t, tenantOptions{sims: sims, config: withRedis, now: clk.Now})
	g2 := startTenantGW(t, tenantOptions{sims: sims, config: withRedis, now: clk.Now})
	runLimits(t, []*tenantGW{g1, g2}, clk, "team-a-key-0123456789")
}

// Redis unreachable: failing open, each gateway counts on its own and reports the backend
// down; failing closed, keys with limits get 503 and keys without go on.
func TestKeyLimitsRedisDown(t *testing.T) {
	sims := startSims(t, 1)
	down := func(mode string) func(c *config.Config) {
		return func(c *config.Config) {
			limitedKey(c)
			c.Limits.Backend, c.Limits.OnBackendError = "redis://127.0.0.1:1/0", mode
		}
	}
	open := startTenantGW(t, tenantOptions{sims: sims, config: down("open")})
	closed := startTenantGW(t, tenantOptions{sims: sims, config: down("closed")})
	a := send(t, "POST", open.url+"/v1/chat/completions", "team-a-key-0123456789", chatFor("sim-model", 1))
	if a.status != 200 || a.header.Get("X-Ratelimit-Remaining-Requests") != "4" {
		t.Fatalf("failing open: %d %v %s", a.status, a.header, a.body)
	}
	if m := metricsOf(t, open); !strings.Contains(m, "fencegate_limits_backend_up 0") {
		t.Errorf("failing open, metrics:\n%s", grepLines(m, "limits_backend"))
	}
	for path, body := range map[string]string{
		"/v1/chat/completions": chatFor("sim-model", 1),
		"/v1/messages":         `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		a = send(t, "POST", closed.url+path, "team-a-key-0123456789", body)
		if a.status != 503 || errorCode(a.body) != "limits_unavailable" || a.header.Get("Retry-After") == "" {
			t.Fatalf("%s failing closed: %d %v %s", path, a.status, a.header, a.body)
		}
	}
	if a := send(t, "POST", closed.url+"/v1/chat/completions", "free-key-0123456789", chatFor("sim-model", 1)); a.status != 200 {
		t.Fatalf("a key without limits, failing closed: %d %s", a.status, a.body)
	}
}

// metricsOf reads the gateway's /metrics where any scraper may: on its admin handler.
func metricsOf(t *testing.T, g *tenantGW) string {
	t.Helper()
	return send(t, "GET", g.adminURL+"/metrics", "", "").body
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// An unknown key reads the store again, but at most once a second: a key created a moment
// after the last such read waits for the next second (or the periodic refresh).
func TestStoredKeysMissReadsOncePerSecond(t *testing.T) {
	mem := store.NewMemory()
	t.Cleanup(func() { mem.Close() })
	st := &countingKeys{Store: mem}
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)}
	g := startTenantGW(t, tenantOptions{sims: startSims(t, 1), store: st, now: clk.Now, config: func(c *config.Config) {
		c.Models = c.Models[:1]
		c.Auth.Keys = []config.APIKey{{ID: "cfg", Key: "configured-key-0123456789"}} // closed from the start
		c.Auth.StoreRefresh = config.Duration(time.Hour)                             // no periodic read during the test
	}})
	createStoreKey(t, st, store.APIKey{ID: "a"}, "first-stored-key-0123456789")
	if a := send(t, "GET", g.url+"/v1/models", "first-stored-key-0123456789", ""); a.status != 200 {
		t.Fatalf("a key created after the gateway started: %d", a.status)
	}
	createStoreKey(t, st, store.APIKey{ID: "b"}, "second-stored-key-0123456789")
	if a := send(t, "GET", g.url+"/v1/models", "second-stored-key-0123456789", ""); a.status != 401 {
		t.Fatalf("within the second of the last miss read: %d, want 401", a.status)
	}
	clk.Add(time.Second)
	if a := send(t, "GET", g.url+"/v1/models", "second-stored-key-0123456789", ""); a.status != 200 {
		t.Fatalf("a second later: %d, want 200", a.status)
	}
	// Unknown keys cost one store read a second, however many arrive.
	reads := st.reads.Load()
	for range 5 {
		if a := send(t, "GET", g.url+"/v1/models", "never-created-key-0123456789", ""); a.status != 401 {
			t.Fatalf("an unknown key: %d", a.status)
		}
	}
	if n := st.reads.Load() - reads; n != 0 {
		t.Errorf("5 unknown keys within the second of the last miss read read the store %d times", n)
	}
	clk.Add(time.Second)
	for range 5 {
		send(t, "GET", g.url+"/v1/models", "never-created-key-0123456789", "")
	}
	if n := st.reads.Load() - reads; n != 1 {
		t.Errorf("5 unknown keys in the next second read the store %d times, want 1", n)
	}
	createStoreKey(t, st, store.APIKey{ID: "c"}, "third-stored-key-0123456789")
	if err := g.gw.RefreshKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a := send(t, "GET", g.url+"/v1/models", "third-stored-key-0123456789", ""); a.status != 200 {
		t.Fatalf("after a refresh: %d, want 200", a.status)
	}
}

// countingKeys counts the reads of the API keys.
type countingKeys struct {
	store.Store
	reads atomic.Int64
}

func (c *countingKeys) ListKeys(ctx context.Context) ([]store.APIKey, error) {
	c.reads.Add(1)
	return c.Store.ListKeys(ctx)
}
