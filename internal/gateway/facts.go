package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/discover"
)

// Where a replica's fingerprint facts come from. The configuration is one more source:
// its values are assertions the others must agree with (docs/design.md §3).
const (
	sourceConfig  = "configured"
	sourceMetrics = "metrics" // vllm:cache_config_info
	sourceAgent   = "agent"   // the heartbeat: the agent's scrape, --fingerprint and --model-dir digest
	sourceEngine  = "engine"  // the engine's own endpoints, read by internal/discover
)

// replicaFacts is what the gateway learned about one replica besides its balance state.
// The pool's lock guards it.
type replicaFacts struct {
	// sources holds each source's facts under fingerprint keys; a source that could not be
	// read keeps its previous facts, so that one slow answer does not change a fingerprint.
	sources map[string]map[string]string
	// engineSource names the endpoint the engine facts came from, for messages.
	engineSource string
	// version is the engine's own version, shown in /readyz, never compared.
	version string
	canary  canaryResult
}

// factsOf returns the facts of a member of the pool, made empty if none were told yet.
// Callers hold mu and know that name is a member.
func (p *pool) factsOf(name string) *replicaFacts {
	m := p.members[name]
	if m.facts == nil {
		m.facts = &replicaFacts{sources: map[string]map[string]string{}}
	}
	return m.facts
}

// factsKnown returns the facts told of the named replica, nil when none were. Callers
// hold mu.
func (p *pool) factsKnown(name string) *replicaFacts {
	if m := p.members[name]; m != nil {
		return m.facts
	}
	return nil
}

// setSource records one source's facts of a replica and recomputes its fingerprint.
// Callers hold mu.
func (p *pool) setSource(name, source string, facts map[string]string) {
	kept := make(map[string]string, len(facts))
	for k, v := range facts {
		if slices.Contains(config.FingerprintKeys, k) && v != "" {
			kept[k] = v
		}
	}
	p.factsOf(name).sources[source] = kept
	p.refreshFingerprint(name)
}

// refreshFingerprint merges the configured fingerprint with what every source reports: a
// configured value must be confirmed by every source that states the key, two sources must
// not contradict each other, and a key the configuration leaves out takes the value the
// sources agree on. Any disagreement keeps the replica out, the reason in /readyz. Callers
// hold mu.
func (p *pool) refreshFingerprint(name string) {
	r, m := p.b.Find(name), p.members[name]
	if r == nil || m == nil {
		return
	}
	f := p.factsOf(name)
	configured := m.configured
	effective := make(map[string]string, len(configured))
	for k, v := range configured {
		effective[k] = v
	}
	var mismatches []string
	sources := make([]string, 0, len(f.sources))
	for s := range f.sources {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	for _, k := range config.FingerprintKeys {
		from, val := "", ""
		if v, ok := configured[k]; ok {
			from, val = sourceConfig, v
		}
		for _, s := range sources {
			v, ok := f.sources[s][k]
			switch {
			case !ok:
			case from == "":
				from, val = s, v
				effective[k] = v
			case v != val && from == sourceConfig:
				mismatches = append(mismatches, fmt.Sprintf("%s configured %q, %s reports %q", k, val, p.sourceName(f, s), v))
			case v != val:
				mismatches = append(mismatches, fmt.Sprintf("%s: %s reports %q, %s reports %q", k, p.sourceName(f, from), val, p.sourceName(f, s), v))
			}
		}
	}
	sort.Strings(mismatches)
	m.fpMismatch = ""
	if len(mismatches) > 0 {
		m.fpMismatch = "fingerprint mismatch: " + strings.Join(mismatches, "; ")
	}
	r.Fingerprint = effective
	p.updateIncompatible(name)
}

// sourceName is how a mismatch message names a source. The engine's metrics keep the
// historical wording "engine", which operators' alerts may match.
func (p *pool) sourceName(f *replicaFacts, s string) string {
	switch s {
	case sourceMetrics:
		return "engine"
	case sourceEngine:
		return "engine " + f.engineSource
	case sourceAgent:
		return "agent"
	}
	return s
}

// engineKind is the engine behind a replica: as configured, else as its metrics tell.
func (p *pool) engineKind(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.members[name]; m != nil {
		return m.engineKind()
	}
	return ""
}

// engineKind is the engine behind the member: as configured, else as its metrics tell.
// Callers hold the pool's lock.
func (m *member) engineKind() string {
	if m.engine != "" {
		return m.engine
	}
	return m.detected
}

// discoverFacts asks a replica's engine what it serves, by the engine's own endpoints (see
// internal/discover): vLLM's /v1/models (already read by the scrape: models) and /version,
// SGLang's server info, llama.cpp's /props. Other engines state nothing the fingerprint
// uses. Facts that could not be read are left as they were.
func (s *Server) discoverFacts(ctx context.Context, p *pool, tg target, models []byte) {
	var facts discover.Facts
	var from string
	var err error
	switch p.engineKind(tg.name) {
	case "vllm":
		if models == nil {
			return
		}
		from = discover.ModelsPath
		if facts, err = discover.VLLMModels(models, p.b.Model); err != nil {
			break
		}
		if body, _, gerr := s.engineGet(ctx, tg, discover.VLLMVersionPath); gerr == nil {
			facts.Version, _ = discover.VLLMVersion(body)
		}
	case "sglang":
		for _, path := range discover.SGLangPaths {
			body, status, gerr := s.engineGet(ctx, tg, path)
			if gerr != nil && status == http.StatusNotFound {
				continue // an older or newer SGLang: the other name
			}
			from, err = path, gerr
			if err == nil {
				facts, err = discover.SGLangServerInfo(body)
			}
			break
		}
	case "llamacpp":
		from = discover.LlamaCppPropsPath
		var body []byte
		if body, _, err = s.engineGet(ctx, tg, discover.LlamaCppPropsPath); err == nil {
			facts, err = discover.LlamaCppProps(body)
		}
	default:
		return
	}
	if err != nil || from == "" || ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b.Find(tg.name) == nil {
		return
	}
	f := p.factsOf(tg.name)
	f.engineSource, f.version = from, facts.Version
	r := p.b.Find(tg.name)
	if r.Slots != facts.Slots {
		r.Slots = facts.Slots
		p.grantWaiting(s.now()) // more slots may take a waiter now
	}
	if facts.CacheTokens > 0 {
		// SGLang's cache, from its server info: its metrics do not say it.
		p.setCacheSize(r, p.members[tg.name], recordBlocksFor(facts.CacheTokens), facts.CacheTokens)
	}
	p.setSource(tg.name, sourceEngine, facts.Fingerprint)
}

// engineGet reads one of an engine's informational endpoints, with the replica's
// credentials, bounded in time and size.
func (s *Server) engineGet(ctx context.Context, tg target, path string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.config().Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url+path, nil)
	if err != nil {
		return nil, 0, err
	}
	tg.setCredentials(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return body, resp.StatusCode, nil
}
