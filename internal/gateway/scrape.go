package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/enginemetrics"
)

// maxMetricsBody bounds what is read of an engine's /metrics.
const maxMetricsBody = 4 << 20

// scrapePool reads every replica's /metrics (each scrape_every): the load that routing and
// load shedding use, and the fingerprint labels checked against the configuration.
func (s *Server) scrapePool(ctx context.Context, p *pool) {
	eachTarget(p, func(tg target) {
		snap, err := s.scrape(ctx, tg.url)
		if ctx.Err() != nil || err != nil || !snap.Known {
			return // an engine without these metrics is routed on outstanding requests alone
		}
		p.report(tg.name, snap, s.now())
	})
}

func (s *Server) scrape(ctx context.Context, url string) (enginemetrics.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return enginemetrics.Snapshot{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return enginemetrics.Snapshot{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return enginemetrics.Snapshot{}, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	return enginemetrics.Parse(io.LimitReader(resp.Body, maxMetricsBody))
}

type target struct{ name, url string }

func (p *pool) targets() []target {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]target, 0, len(p.b.Replicas))
	for _, r := range p.b.Replicas {
		out = append(out, target{r.Name, r.URL})
	}
	return out
}

// report records a scrape: the load, and the fingerprint labels the engine reports, which
// must agree with the configured ones; a disagreement keeps the replica out of the pool.
func (p *pool) report(name string, snap enginemetrics.Snapshot, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.b.Find(name)
	if r == nil {
		return
	}
	p.b.ReportLoad(r, balance.Load{Running: snap.Running, Waiting: snap.Waiting, KVUsage: snap.KVUsage, At: now})
	if snap.CacheConfig == nil {
		return
	}
	configured := p.configured[name]
	var mismatches []string
	effective := make(map[string]string, len(configured))
	for k, v := range configured {
		effective[k] = v
	}
	for k, v := range snap.CacheConfig {
		if !slices.Contains(config.FingerprintKeys, k) {
			continue
		}
		if want, ok := configured[k]; ok && want != v {
			mismatches = append(mismatches, fmt.Sprintf("%s configured %q, engine reports %q", k, want, v))
			continue
		}
		effective[k] = v
	}
	sort.Strings(mismatches)
	reason := ""
	if len(mismatches) > 0 {
		reason = "fingerprint mismatch: " + strings.Join(mismatches, "; ")
	}
	p.b.SetIncompatible(r, reason)
	r.Fingerprint = effective
}
