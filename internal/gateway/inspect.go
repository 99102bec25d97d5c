package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/openai"
)

// ReplicaReport is one replica as `fencegate check --probe` found it: checked by the same
// probe, scrape and discovery of facts a running gateway uses (probe.go, scrape.go,
// facts.go), plus a question to each API's endpoint.
type ReplicaReport struct {
	Model, Replica, URL string
	Agent               bool
	// Kind is the engine: as configured, else as its metrics tell ("" when neither does).
	Kind    string
	Version string
	// Served are the model names the engine's /v1/models lists.
	Served []string
	// Fingerprint is the replica's effective fingerprint: the configured values and what
	// the engine reported of itself.
	Fingerprint map[string]string
	// APIs are the APIs whose endpoint the engine serves; Missing those of its pool's APIs
	// it does not (see Inspect).
	APIs, Missing []string
	// Problems say why the gateway would not send it requests, or why some would fail on
	// it. Empty: it passed.
	Problems []string
}

// probedAPIs are the APIs whose engine endpoints Inspect asks about, in report order.
var probedAPIs = []openai.Endpoint{openai.Chat, openai.Completions, openai.Messages, openai.Responses, openai.Embeddings}

// Inspect contacts every replica of cfg once (replicas_from names resolved once) and
// reports what it serves, as a gateway started with cfg would find it: whether it answers
// its health check, lists the model's name, accepts the configured credentials, agrees with
// the configured fingerprint, and which APIs it serves. The gateway sends every API of a
// model to every replica of its pool, so a replica that does not serve an API another
// replica of its pool serves fails requests that land on it: that is a problem too. An API
// no replica of a pool serves is not (the engine answers 404, the same on every replica).
// Nothing is served, no store is opened, and no generation runs: an endpoint is asked with
// an empty JSON object, which an engine that serves it refuses as invalid and one that does
// not answers 404.
//
// Of opt, Dial and Resolver are used (tests give their own); nothing is logged.
func Inspect(ctx context.Context, cfg *config.Config, opt Options) ([]ReplicaReport, error) {
	c := *cfg
	c.Store, c.Limits.Backend = "memory:", config.LimitsLocal // nothing shared is touched
	s, err := New(ctx, &c, Options{Logger: slog.New(slog.DiscardHandler), Dial: opt.Dial, Resolver: opt.Resolver})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []ReplicaReport
	for _, m := range cfg.Models {
		p := s.current().pools[m.Name]
		if d := m.ReplicasFrom; d != nil {
			key, err := discoveryKey(cfg, m.Name)
			if err != nil {
				return nil, err
			}
			// discover keeps a pool as it is when the name does not resolve (a DNS
			// hiccup must not drain a pool); here that is worth saying.
			lctx, cancel := context.WithTimeout(ctx, d.Every.D())
			addrs, err := s.resolver.LookupHost(lctx, d.DNS)
			cancel()
			if err != nil || len(addrs) == 0 {
				why := fmt.Sprintf("replicas_from: %s resolves to no address", d.DNS)
				if err != nil {
					why = fmt.Sprintf("replicas_from: %v", err)
				}
				out = append(out, ReplicaReport{Model: m.Name, Replica: "(replicas_from)", URL: d.Scheme + "://" + d.DNS, Problems: []string{why}})
			} else {
				s.discover(ctx, p, *d, key)
			}
		}
		s.scrapePool(ctx, p)
		s.probePool(ctx, p)
		out = append(out, s.inspectPool(ctx, p)...)
	}
	return out, ctx.Err()
}

// inspectPool reports the replicas of p after a scrape and a probe.
func (s *Server) inspectPool(ctx context.Context, p *pool) []ReplicaReport {
	tgs := p.targets()
	reports := make([]ReplicaReport, len(tgs))
	byName := make(map[string]*ReplicaReport, len(tgs))
	for i, tg := range tgs {
		reports[i] = ReplicaReport{Model: p.b.Model, Replica: tg.name, URL: tg.url}
		byName[tg.name] = &reports[i]
	}
	eachTarget(p, func(tg target) {
		r := byName[tg.name]
		if served, _, _, err := s.servedModels(ctx, tg); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("cannot confirm that it serves %s: GET %s: %v", p.b.Model, "/v1/models", err))
		} else {
			r.Served = served
		}
		r.APIs = s.servedAPIs(ctx, tg)
	})
	now := s.now()
	p.mu.Lock()
	for i := range reports {
		r := &reports[i]
		br, m := p.b.Find(r.Replica), p.members[r.Replica]
		if br == nil || m == nil {
			continue
		}
		r.Agent, r.Kind, r.Fingerprint = m.link != nil, m.engineKind(), maps.Clone(br.Fingerprint)
		if f := m.facts; f != nil {
			r.Version = f.version
		}
		// Overloaded and draining are moments, not mistakes; every other state is.
		switch st := br.StateAt(now, p.b.Limits); st {
		case balance.Healthy, balance.Overloaded, balance.Draining:
		default:
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %s", st, br.ReasonAt(now)))
		}
	}
	p.mu.Unlock()
	// What the pool serves is what any of its replicas serves.
	var pool []string
	for _, r := range reports {
		for _, a := range r.APIs {
			if !slices.Contains(pool, a) {
				pool = append(pool, a)
			}
		}
	}
	for i := range reports {
		r := &reports[i]
		if r.Served == nil && len(r.Problems) > 0 && len(r.APIs) == 0 {
			continue // unreachable or refused: its endpoints say nothing
		}
		for _, ep := range probedAPIs {
			if a := ep.String(); slices.Contains(pool, a) && !slices.Contains(r.APIs, a) {
				r.Missing = append(r.Missing, a)
			}
		}
		if len(r.Missing) > 0 {
			paths := make([]string, len(r.Missing))
			for j, a := range r.Missing {
				paths[j] = apiPath(a)
			}
			r.Problems = append(r.Problems, fmt.Sprintf("does not serve %s, which another replica of %s serves: those requests fail when they land here",
				strings.Join(paths, ", "), p.b.Model))
		}
	}
	return reports
}

// servedAPIs asks each API's endpoint of an engine with an empty JSON object: an engine
// that serves it refuses the body (400 or 422), one that does not answers 404 (or 405).
// Nothing is generated either way. Credentials refused or an engine that does not answer
// leave the API out.
func (s *Server) servedAPIs(ctx context.Context, tg target) []string {
	var apis []string
	for _, ep := range probedAPIs {
		status, err := s.engineAsk(ctx, tg, ep.Path())
		if err != nil {
			continue
		}
		switch status {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUnauthorized, http.StatusForbidden:
		default:
			apis = append(apis, ep.String())
		}
	}
	return apis
}

// engineAsk posts an empty JSON object to one of an engine's endpoints, with the replica's
// credentials, and returns the status it answers.
func (s *Server) engineAsk(ctx context.Context, tg target, path string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.config().Health.ProbeTimeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url+path, strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	tg.setCredentials(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// apiPath is the endpoint of an API named as openai.Endpoint.String names it.
func apiPath(name string) string {
	for _, ep := range probedAPIs {
		if ep.String() == name {
			return ep.Path()
		}
	}
	return name
}

// UnservedAPIs lists the endpoints of the APIs that no replica of model among reports
// serves, nil when none of its replicas could be asked.
func UnservedAPIs(model string, reports []ReplicaReport) []string {
	served := map[string]bool{}
	asked := false
	for _, r := range reports {
		if r.Model != model || r.Served == nil {
			continue
		}
		asked = true
		for _, a := range r.APIs {
			served[a] = true
		}
	}
	if !asked {
		return nil
	}
	var gap []string
	for _, ep := range probedAPIs {
		if !served[ep.String()] {
			gap = append(gap, ep.Path())
		}
	}
	return gap
}
