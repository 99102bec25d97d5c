package agent

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/fencegate/fencegate/internal/enginemetrics"
)

// maxMetricsBody bounds one scrape of the engine's /metrics.
const maxMetricsBody = 8 << 20

// scrapeResult is the engine's state as of one scrape.
type scrapeResult struct {
	load        EngineLoad
	fingerprint map[string]string // scraped labels only; configured ones are merged on read
}

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
		a.metrics.scrapeErrors.Inc()
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
	snap, err := enginemetrics.Parse(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return load, nil, fmt.Errorf("parsing %s: %w", target, err)
	}
	load.Running, load.Waiting, load.KVUsage = snap.Running, snap.Waiting, snap.KVUsage
	fp := maps.Clone(snap.CacheConfig)
	if fp == nil {
		fp = make(map[string]string)
	}
	if snap.Model != "" {
		// The name the engine serves under, not the weights it loaded (the fingerprint's
		// "model"), which its metrics do not tell.
		fp["served_model"] = snap.Model
	}
	return load, fp, nil
}

// engineState returns the latest scraped load and the fingerprint: scraped
// labels and the model directory's digest, overridden by configured ones.
func (a *Agent) engineState() (EngineLoad, map[string]string) {
	fp := make(map[string]string)
	var load EngineLoad
	if res := a.load.Load(); res != nil {
		load = res.load
		maps.Copy(fp, res.fingerprint)
	} else {
		load.Error = "not scraped yet"
	}
	if a.content != "" {
		fp[FingerprintContent] = a.content
	}
	maps.Copy(fp, a.cfg.Fingerprint)
	return load, fp
}
