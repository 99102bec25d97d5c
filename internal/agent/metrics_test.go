package agent

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/sim"
)

// get answers a GET of url with key as the agent's secret ("" none).
func get(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(HeaderAgentKey, key)
	}
	resp, err := newHTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sample is the value of the series named exactly so (name and labels) in an exposition.
func sample(t *testing.T, exposition, series string) string {
	t.Helper()
	for line := range strings.Lines(exposition) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Errorf("no series %s", series)
	return ""
}

// lineOf is the first line of an exposition that starts with prefix ("" when none).
func lineOf(exposition, prefix string) string {
	for line := range strings.Lines(exposition) {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// The agent counts what it does — fenced, unfenced, passthrough and control requests,
// leases granted, attempts ended by reason, stale epochs refused, refusals for the secret —
// and reports its leases, engine and secrets; the metrics listener serves them and the
// engine's own /metrics without the secret, and nothing else; on the agent's own port they
// need the secret.
func TestAgentMetrics(t *testing.T) {
	s := startSim(t, sim.Config{DecodePerToken: 5 * time.Millisecond})
	clock := newFakeClock() // frozen: a lease ends only by a cancel
	const secret = "s3cret"
	a := startAgent(t, Config{Engine: s.URL(), Now: clock.Now, Secret: secret, MetricsListen: "127.0.0.1:0"})
	a.scrapeOnce(testContext(t)) // one scrape now, so that the engine's state is known
	hc := newHTTPClient(t)
	ctl := controlClient(t, a, secret)
	send := func(l *leased, maxTokens int) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, a.URL()+"/v1/chat/completions",
			strings.NewReader(string(chatBody(t, maxTokens, true))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderAgentKey, secret)
		if l != nil {
			SetLeaseHeaders(req.Header, l.attempt, l.epoch, l.ttl, "gw-test")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// A fenced stream that finishes.
	done := &leased{attempt: "req_done.a1", epoch: 1, ttl: time.Second}
	resp := send(done, 3)
	readStream(resp.Body, nil)
	resp.Body.Close()
	waitEnded(t, a, done.attempt)
	// A fenced stream revoked by a cancel while it runs.
	long := &leased{attempt: "req_long.a1", epoch: 2, ttl: time.Second}
	longResp := send(long, 2000)
	started := make(chan struct{})
	go func() {
		readStream(longResp.Body, func(n int) {
			if n == 2 {
				close(started)
			}
		})
		longResp.Body.Close()
	}()
	<-started
	if _, err := ctl.Cancel(testContext(t), long.attempt, long.epoch); err != nil {
		t.Fatal(err)
	}
	// The same attempt at the revoked epoch again: a late request, refused.
	late := send(long, 3)
	late.Body.Close()
	if late.StatusCode != http.StatusConflict {
		t.Fatalf("a late request of a revoked attempt: %d", late.StatusCode)
	}
	renew(t, ctl, time.Second)
	// An unfenced data request, a passthrough, and one refused for the secret.
	resp = send(nil, 2)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if code, _ := get(t, a.URL()+"/v1/models", secret); code != 200 {
		t.Fatalf("passthrough: %d", code)
	}
	if code, _ := get(t, a.URL()+"/v1/models", "wrong"); code != 401 {
		t.Fatalf("a wrong secret: %d", code)
	}

	code, own := get(t, a.MetricsURL()+PathOwnMetrics, "")
	if code != 200 {
		t.Fatalf("metrics listener /metrics: %d", code)
	}
	for series, want := range map[string]string{
		`fencegate_agent_requests_total{kind="fenced"}`:           "3",
		`fencegate_agent_requests_total{kind="unfenced"}`:         "1",
		`fencegate_agent_requests_total{kind="passthrough"}`:      "1",
		`fencegate_agent_requests_total{kind="control"}`:          "2",
		`fencegate_agent_leases_granted_total`:                    "2",
		`fencegate_agent_stale_epochs_total`:                      "1",
		`fencegate_agent_attempts_ended_total{reason="finished"}`: "1",
		`fencegate_agent_attempts_ended_total{reason="revoked"}`:  "1",
		`fencegate_agent_cancels_total`:                           "1",
		`fencegate_agent_renewals_total`:                          "1",
		`fencegate_agent_unauthorized_total`:                      "1",
		`fencegate_agent_leases_active`:                           "0",
		`fencegate_agent_engine_up`:                               "1",
		`fencegate_agent_secrets`:                                 "1",
		`fencegate_agent_engine_scrape_errors_total`:              "0",
	} {
		if got := sample(t, own, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
	if !strings.Contains(own, "go_goroutines") || !strings.Contains(own, "process_") {
		t.Error("the agent's metrics lack the runtime's")
	}

	// The engine's own metrics, as the engine serves them, without the secret.
	code, engine := get(t, a.MetricsURL()+PathEngineMetrics, "")
	if code != 200 || !strings.Contains(engine, "vllm:num_requests_running") || strings.Contains(engine, "fencegate_agent_") {
		t.Fatalf("metrics listener /engine/metrics: %d\n%s", code, engine)
	}
	_, direct := get(t, s.URL()+"/metrics", "")
	if info := lineOf(engine, "vllm:cache_config_info{"); info == "" || info != lineOf(direct, "vllm:cache_config_info{") {
		t.Errorf("the engine's metrics through the agent differ from the engine's: %q", info)
	}
	// Nothing else is served there: no path reaches the engine's API without the secret.
	for _, path := range []string{"/v1/models", "/health", PathAttempts, PathMetrics} {
		if code, _ := get(t, a.MetricsURL()+path, ""); code != 404 {
			t.Errorf("metrics listener %s: %d, want 404", path, code)
		}
	}
	// On the agent's own port, its metrics need the secret like everything else.
	if code, _ := get(t, a.URL()+PathMetrics, ""); code != 401 {
		t.Errorf("%s without the secret: %d", PathMetrics, code)
	}
	if code, body := get(t, a.URL()+PathMetrics, secret); code != 200 || !strings.Contains(body, "fencegate_agent_leases_granted_total 2") {
		t.Errorf("%s with the secret: %d", PathMetrics, code)
	}
}

// An engine the agent cannot reach shows as down in its metrics.
func TestAgentMetricsEngineDown(t *testing.T) {
	a := startAgent(t, Config{Engine: "http://127.0.0.1:1", MetricsListen: "127.0.0.1:0"})
	a.scrapeOnce(testContext(t))
	_, own := get(t, a.MetricsURL()+PathOwnMetrics, "")
	if sample(t, own, "fencegate_agent_engine_up") != "0" || sample(t, own, "fencegate_agent_engine_scrape_errors_total") == "0" ||
		sample(t, own, "fencegate_agent_secrets") != "0" {
		t.Errorf("metrics of an agent whose engine is down:\n%s", own)
	}
	if code, _ := get(t, a.MetricsURL()+PathEngineMetrics, ""); code != http.StatusBadGateway {
		t.Errorf("the engine's metrics of an engine that is down: %d", code)
	}
}
