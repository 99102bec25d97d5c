package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/sim"
)

// exportedFamilies runs a gateway in front of simulated replicas on loopback, sends it the
// traffic that makes each of its metrics appear (a metric with labels is exported from its
// first event on), and returns the metric families of its /metrics with their label names.
//
// The traffic: plain requests, streams slower to their first token than the keepalive, a
// stream cut after output (interrupted), a request whose two attempts are reset before
// output (a rerun, an ejection, an ejection held back for the last healthy replica, a
// failure), a request refused for lack of capacity (shed), one refused for its key's
// limit, and a pool with a canary.
func exportedFamilies(t *testing.T) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	startSim := func(c sim.Config) *sim.Server {
		s, err := sim.Start(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var (
		// Prefill takes 5 ms per prompt token: every stream's first token comes later
		// than the 1 ms keepalive, so each counts as slow to its first token.
		main1 = startSim(sim.Config{Name: "main-1", Model: "main", PrefillPerToken: 5 * time.Millisecond})
		main2 = startSim(sim.Config{Name: "main-2", Model: "main", PrefillPerToken: 5 * time.Millisecond})
		ej1   = startSim(sim.Config{Name: "ej-1", Model: "eject"})
		ej2   = startSim(sim.Config{Name: "ej-2", Model: "eject"})
		shed  = startSim(sim.Config{Name: "shed-1", Model: "shed"})
	)
	const tenantKey, limitedKey = "tenant-secret", "limited-secret"
	hash := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	cfg := &config.Config{
		Listen:      "127.0.0.1:0",
		AdminListen: "127.0.0.1:0",
		Store:       "memory:",
		Models: []config.Model{
			{Name: "main", Replicas: []config.Replica{{Name: "main-1", URL: main1.URL()}, {Name: "main-2", URL: main2.URL()}},
				Canary: &config.Canary{Every: config.Duration(time.Hour)}},
			{Name: "eject", Replicas: []config.Replica{{Name: "ej-1", URL: ej1.URL()}, {Name: "ej-2", URL: ej2.URL()}}},
			{Name: "shed", Replicas: []config.Replica{{Name: "shed-1", URL: shed.URL()}}, MaxOutstanding: 1,
				Queue: config.Queue{MaxLen: -1}}, // no queue: refused at once
		},
		Auth: config.Auth{Keys: []config.APIKey{
			{ID: "tenant", KeySHA256: hash(tenantKey)},
			{ID: "limited", KeySHA256: hash(limitedKey), RPM: 1},
		}},
	}
	cfg.Policy.Keepalive = config.Duration(time.Millisecond)
	cfg.Health.EjectAfter = 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(ctx, cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	gw.Start()
	api := httptest.NewServer(gw.Handler())
	t.Cleanup(api.Close)
	admin := httptest.NewServer(gw.AdminHandler())
	t.Cleanup(admin.Close)

	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	tenant := client(tenantKey)
	params := func(model string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(8),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about honest failover, please.")}}
	}
	// stream reads a stream to its end and returns its error.
	stream := func(c openai.Client, p openai.ChatCompletionNewParams, opts ...option.RequestOption) error {
		s := c.Chat.Completions.NewStreaming(ctx, p, opts...)
		for s.Next() {
		}
		return s.Err()
	}
	// apiCode is the error code of a refused request; streamErrorCode that of a stream's
	// final error event, which the SDK reports as text.
	apiCode := func(err error) string {
		var e *openai.Error
		if errors.As(err, &e) {
			return e.Code
		}
		return fmt.Sprintf("not an API error: %v", err)
	}
	streamErrorCode := func(err error) string {
		if err == nil {
			return "no error"
		}
		var ev struct {
			Code string `json:"code"`
		}
		_, body, _ := strings.Cut(err.Error(), "{")
		if json.Unmarshal([]byte("{"+body), &ev) != nil {
			return fmt.Sprintf("not an error event: %v", err)
		}
		return ev.Code
	}

	// Completed, streamed and not.
	for range 2 {
		if err := stream(tenant, params("main")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tenant.Chat.Completions.New(ctx, params("main")); err != nil {
		t.Fatal(err)
	}
	// Interrupted: the replica resets the connection after the third output token.
	if err := stream(tenant, params("main"), option.WithHeader("X-Sim-Fault", "reset@sent:2")); streamErrorCode(err) != "upstream_decode_interrupted" {
		t.Fatalf("a stream cut after output: %v", err)
	}
	// Both replicas of "eject" reset their next request at prefill: the first attempt
	// fails and is rerun, the rerun fails too. With eject_after 1 the first replica is
	// ejected, the second is held in rotation as the last healthy one.
	for _, s := range []*sim.Server{ej1, ej2} {
		if err := s.ArmFault("reset@prefill", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream(tenant, params("eject")); err == nil {
		t.Fatal("a request whose every attempt was reset succeeded")
	}
	// Shed: "shed" takes one request at a time. The first holds its stream open after its
	// first token; the second finds the only replica at its limit.
	holdCtx, release := context.WithCancel(ctx)
	held := tenant.Chat.Completions.NewStreaming(holdCtx, params("shed"), option.WithHeader("X-Sim-Fault", "hang@sent:0"))
	if !held.Next() {
		t.Fatalf("the held stream: %v", held.Err())
	}
	if _, err := tenant.Chat.Completions.New(ctx, params("shed")); apiCode(err) != "pool_overloaded" {
		t.Fatalf("a request over the pool's capacity: %v", err)
	}
	release()
	held.Close()
	// Limited: one request per minute for this key.
	limited := client(limitedKey)
	if _, err := limited.Chat.Completions.New(ctx, params("main")); err != nil {
		t.Fatal(err)
	}
	if _, err := limited.Chat.Completions.New(ctx, params("main")); apiCode(err) != "rate_limit_exceeded" {
		t.Fatalf("a request over the key's limit: %v", err)
	}

	// The admin listener is on loopback: /metrics needs no key.
	resp, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	families := map[string][]string{}
	for name, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		families[name] = nil
		for l := range labels {
			families[name] = append(families[name], l)
		}
	}
	return families
}

// Every metric the dashboard and the alert rules read is one a running gateway exports,
// with the labels they match on.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	families := exportedFamilies(t)
	checkSelectorsExist(t, dashboardSelectors(t, loadDashboard(t)), families)
	checkSelectorsExist(t, rulesSelectors(t), families)
}
