package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/discover"
	"github.com/fencegate/fencegate/internal/enginemetrics"
	"github.com/fencegate/fencegate/internal/request"
)

// maxMetricsBody bounds what is read of an engine's /metrics.
const maxMetricsBody = 4 << 20

// scrapePool reads every replica's /metrics (each scrape_every): the load that routing and
// load shedding use, and the fingerprint labels checked against the configuration; then what
// the engine says about itself on its own endpoints (facts.go).
func (s *Server) scrapePool(ctx context.Context, p *pool) {
	eachTarget(p, func(tg target) {
		models, body, status, err := s.servedModels(ctx, tg)
		switch {
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			p.refusedCredentials(s, tg.name, status)
		case err == nil:
			p.credentialsAccepted(s, tg.name)
			p.checkModel(tg.name, models)
		}
		snap, err := s.scrape(ctx, tg)
		if ctx.Err() == nil && err == nil && snap.Known {
			p.report(tg.name, snap, s.now())
		} // else an engine without these metrics is routed on outstanding requests alone
		if ctx.Err() == nil {
			s.discoverFacts(ctx, p, tg, body)
		}
	})
}

// servedModels reads the model ids an engine serves from its /v1/models, with the
// replica's credentials (vLLM guards every /v1 path with its --api-key), and returns the
// body too, for the facts it holds. It returns the engine's status as well, so that a
// refusal of the credentials is told apart.
func (s *Server) servedModels(ctx context.Context, tg target) ([]string, []byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.config().Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url+discover.ModelsPath, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	tg.setCredentials(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, resp.StatusCode, fmt.Errorf("models: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil || json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return nil, nil, resp.StatusCode, fmt.Errorf("models: no model list")
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, body, resp.StatusCode, nil
}

// refusedCredentials keeps a replica that refused the gateway's credentials out of the
// pool, with the reason in /readyz, and says so loudly: it is a configuration mistake
// that no request can work around.
func (p *pool) refusedCredentials(s *Server, name string, status int) {
	p.mu.Lock()
	m := p.members[name]
	if m == nil {
		p.mu.Unlock()
		return // it left the pool meanwhile
	}
	was := m.unauthorized
	why := fmt.Sprintf("engine answered %d to the gateway's credentials: its api_key_file/api_key_env is missing or wrong", status)
	if m.key == "" {
		why = fmt.Sprintf("engine answered %d: it requires an API key and none is configured for it (api_key_file/api_key_env)", status)
	}
	m.unauthorized = why
	p.updateIncompatible(name)
	p.mu.Unlock()
	if was == "" {
		s.log.Error("replica refused the gateway's credentials; it gets no work until they are fixed", "model", p.b.Model, "replica", name, "status", status)
	}
}

// credentialsAccepted clears a refusal once an authenticated check succeeds.
func (p *pool) credentialsAccepted(s *Server, name string) {
	p.mu.Lock()
	was := ""
	if m := p.members[name]; m != nil && m.unauthorized != "" {
		was, m.unauthorized = m.unauthorized, ""
		p.updateIncompatible(name)
	}
	p.mu.Unlock()
	if was != "" {
		s.log.Info("replica accepts the gateway's credentials again", "model", p.b.Model, "replica", name)
	}
}

// checkModel keeps a replica out of a pool whose model it does not serve (a replica
// restarted with other weights, or a configuration mistake).
func (p *pool) checkModel(name string, served []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[name]
	if m == nil {
		return // it left the pool meanwhile
	}
	if slices.Contains(served, p.b.Model) {
		m.wrongModel = ""
	} else {
		m.wrongModel = fmt.Sprintf("serves %s, not %s", strings.Join(served, ", "), p.b.Model)
	}
	p.updateIncompatible(name)
}

func (s *Server) scrape(ctx context.Context, tg target) (enginemetrics.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.config().Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url+"/metrics", nil)
	if err != nil {
		return enginemetrics.Snapshot{}, err
	}
	tg.setCredentials(req.Header)
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

// target is a replica as the background checks reach it: key is the engine's API key,
// agentKey the agent's secret when the replica is an agent.
type target struct{ name, url, key, agentKey string }

// setCredentials adds the replica's credentials to a request for it.
func (tg target) setCredentials(h http.Header) {
	request.SetCredentials(h, tg.key, tg.agentKey)
}

func (p *pool) targets() []target {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]target, 0, len(p.b.Replicas))
	for _, r := range p.b.Replicas {
		tg := target{name: r.Name, url: r.URL}
		if m := p.members[r.Name]; m != nil {
			tg.key, tg.agentKey = m.key, m.agentKey()
		}
		out = append(out, tg)
	}
	return out
}

// report records a scrape, or an agent's heartbeat: the load, and the fingerprint labels the
// engine reports, which must agree with the configured ones and with what the engine's own
// endpoints say (facts.go); a disagreement keeps the replica out of the pool. A heartbeat's
// snapshot names no engine, which tells the two sources apart.
func (p *pool) report(name string, snap enginemetrics.Snapshot, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, m := p.b.Find(name), p.members[name]
	if r == nil || m == nil {
		return
	}
	p.b.ReportLoad(r, balance.Load{Running: snap.Running, Waiting: snap.Waiting, KVUsage: snap.KVUsage, At: now})
	p.grantWaiting(now) // the engine may have room now, or a Retry-After have passed
	if snap.Engine != "" {
		m.detected = snap.Engine
	}
	if snap.CacheConfig == nil {
		return
	}
	if n, ok := prefixCapacity(snap.CacheConfig); ok {
		p.setCacheSize(r, m, n, cacheTokens(snap.CacheConfig))
	}
	source := sourceMetrics
	if snap.Engine == "" {
		source = sourceAgent
	}
	p.setSource(name, source, snap.CacheConfig)
}

// setCacheSize records the size of r's engine cache, in tokens, and the generous record
// capacity it gives, and sizes r's record by them. Callers hold mu.
func (p *pool) setCacheSize(r *balance.Replica, m *member, generousBlocks int, tokens int64) {
	m.generousBlocks = generousBlocks
	m.cacheTokens = tokens
	if m.kv != nil {
		m.kv.tracker.SetCacheTokens(m.cacheTokens)
	}
	p.sizeRecord(r, m)
}

// updateIncompatible keeps the replica out while any check disagrees. Callers hold mu.
func (p *pool) updateIncompatible(name string) {
	r, m := p.b.Find(name), p.members[name]
	if r == nil || m == nil {
		return
	}
	var reasons []string
	for _, why := range []string{m.unauthorized, m.wrongModel, m.fpMismatch, p.canaryExclusion(name)} {
		if why != "" {
			reasons = append(reasons, why)
		}
	}
	p.b.SetIncompatible(r, strings.Join(reasons, "; "))
}
