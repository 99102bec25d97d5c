package agent

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxMetricsBody bounds one scrape of the engine's /metrics.
const maxMetricsBody = 8 << 20

// scrapeResult is the engine's state as of one scrape.
type scrapeResult struct {
	load        EngineLoad
	fingerprint map[string]string // scraped labels only; configured ones are merged on read
}

// Metric names the agent reads, vLLM's and SGLang's. Both sets are looked
// for whatever the engine kind: a server that exposes neither is reported up
// with zero load.
var (
	runningMetrics = []string{"vllm:num_requests_running", "sglang:num_running_reqs"}
	waitingMetrics = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs"}
	kvMetrics      = []string{"vllm:kv_cache_usage_perc", "sglang:token_usage", "vllm:gpu_cache_usage_perc"}
)

// scrapeLoop scrapes the engine's /metrics every ScrapeEvery until Close, so
// a renewal can report the engine's load without waiting on the engine.
func (a *Agent) scrapeLoop() {
	defer a.wg.Done()
	ticker := time.NewTicker(a.cfg.ScrapeEvery)
	defer ticker.Stop()
	for {
		a.scrapeOnce(a.life)
		select {
		case <-ticker.C:
		case <-a.life.Done():
			return
		}
	}
}

// scrapeOnce scrapes the engine once and stores the result.
func (a *Agent) scrapeOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(2*a.cfg.ScrapeEvery, time.Second))
	defer cancel()
	res := &scrapeResult{}
	load, fingerprint, err := a.scrape(ctx)
	res.load, res.fingerprint = load, fingerprint
	if err != nil {
		res.load.Error = err.Error()
	}
	res.load.ScrapeMs = a.cfg.Now().UnixMilli()
	a.load.Store(res)
}

// scrape reads the engine's load and fingerprint labels from /metrics. The
// engine is up when it answered at all with a status below 500.
func (a *Agent) scrape(ctx context.Context) (EngineLoad, map[string]string, error) {
	var load EngineLoad
	target := a.engineURLFor(&url.URL{Path: "/metrics"})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return load, nil, fmt.Errorf("building the scrape request: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := a.client.Do(req)
	if err != nil {
		return load, nil, fmt.Errorf("scraping %s: %w", target, err)
	}
	defer resp.Body.Close()
	load.Up = resp.StatusCode < 500
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetricsBody))
		return load, nil, fmt.Errorf("scraping %s: status %d", target, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return load, nil, fmt.Errorf("parsing %s: %w", target, err)
	}
	return loadFrom(families), fingerprintFrom(families), nil
}

// loadFrom sums running and waiting over every series (one per engine
// process behind one server) and takes the highest KV usage.
func loadFrom(families map[string]*dto.MetricFamily) EngineLoad {
	load := EngineLoad{Up: true}
	load.Running = int(sumOf(families, runningMetrics))
	load.Waiting = int(sumOf(families, waitingMetrics))
	for _, name := range kvMetrics {
		for _, m := range families[name].GetMetric() {
			load.KVUsage = max(load.KVUsage, valueOf(m))
		}
	}
	return load
}

// sumOf returns the sum of the first of names the engine exposes.
func sumOf(families map[string]*dto.MetricFamily, names []string) float64 {
	for _, name := range names {
		f, ok := families[name]
		if !ok {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			total += valueOf(m)
		}
		return total
	}
	return 0
}

func valueOf(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// fingerprintFrom collects the replica fingerprint the engine exposes: the
// labels of vllm:cache_config_info, and the served model's name as "model"
// (the model_name label of the load metrics).
func fingerprintFrom(families map[string]*dto.MetricFamily) map[string]string {
	fp := make(map[string]string)
	if f := families["vllm:cache_config_info"]; f != nil && len(f.GetMetric()) > 0 {
		for _, l := range f.GetMetric()[0].GetLabel() {
			fp[l.GetName()] = l.GetValue()
		}
	}
	for _, name := range append(append([]string{}, runningMetrics...), waitingMetrics...) {
		f := families[name]
		if f == nil || len(f.GetMetric()) == 0 {
			continue
		}
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "model_name" {
				fp["model"] = l.GetValue()
			}
		}
		break
	}
	return fp
}

// engineState returns the latest scraped load and the fingerprint: scraped
// labels overridden by configured ones.
func (a *Agent) engineState() (EngineLoad, map[string]string) {
	fp := make(map[string]string)
	var load EngineLoad
	if res := a.load.Load(); res != nil {
		load = res.load
		maps.Copy(fp, res.fingerprint)
	} else {
		load.Error = "not scraped yet"
	}
	maps.Copy(fp, a.cfg.Fingerprint)
	return load, fp
}
