package gateway

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/canary"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// The consistency canary (docs/design.md §3). Fingerprints are what engines and the
// configuration say; the canary checks what the replicas do: every replica of a fingerprint
// group answers the same fixed greedy probe, and one whose answer differs from its group's
// majority — also when asked a second time, since engines are not bitwise deterministic
// across batch sizes — is marked diverges and kept out of reruns (or of all work).

// Headers and the user that mark a canary probe, so that an engine's logs show it for what
// it is. Probes are sent by the gateway itself: they are no client requests, so they have
// no journal rows and no request metrics.
const (
	canaryHeader = "X-Fencegate-Canary"
	canaryUser   = "fencegate-canary"
	// canarySeed is the probe's fixed seed: with temperature 0 it changes nothing on a
	// greedy engine, and it pins the answer on one that samples anyway.
	canarySeed = 424242
	// canaryTick is how often the schedule is looked at: a replica that joins is checked
	// within it.
	canaryTick = time.Second
	// canaryTimeout bounds one probe: a short greedy answer.
	canaryTimeout = 30 * time.Second
)

// canarySchedule is a pool's canary timing; the pool's lock guards it.
type canarySchedule struct {
	next    time.Time // when the next scheduled check is due (zero: not yet planned)
	kicked  bool      // a replica (re)joined: check at the next tick
	running bool      // a check is under way
	cycles  int       // checks completed
}

// canaryResult is a replica's latest canary verdict.
type canaryResult struct {
	State     string
	CheckedAt time.Time
	Detail    string
	// Position is the first differing token, Text the replica's answer and Majority its
	// group's, when it diverges.
	Position int
	Text     string
	Majority string
	// Tie: its group has no majority answer, so no replica can be blamed alone; it is kept
	// from reruns but never from new work.
	Tie bool
	// CacheState is the cache check's own verdict ("" when it did not run), Cache its
	// evidence when the replica is cache_diverges.
	CacheState string
	Cache      *cacheEvidence
}

// canaryStatus is a replica's canary as /readyz shows it.
type canaryStatus struct {
	State     string     `json:"state"`
	CheckedAt *time.Time `json:"checked_at,omitempty"`
	Detail    string     `json:"detail,omitempty"`
	Position  *int       `json:"first_differing_token,omitempty"`
	Text      string     `json:"answer,omitempty"`
	Majority  string     `json:"majority_answer,omitempty"`
	// CacheCheck is the cache check's verdict: agrees, cache_diverges or unknown.
	CacheCheck string         `json:"cache_check,omitempty"`
	Cache      *cacheEvidence `json:"cache,omitempty"`
}

// canaryStatus is the named replica's canary for /readyz; nil when the pool has none.
// Callers hold mu.
func (p *pool) canaryStatus(name string) *canaryStatus {
	if p.canary == nil {
		return nil
	}
	st := &canaryStatus{State: canary.Unknown}
	f := p.factsKnown(name)
	if f == nil || f.canary.State == "" {
		return st
	}
	c := f.canary
	st.State, st.Detail, st.Text, st.Majority = c.State, c.Detail, c.Text, c.Majority
	st.CacheCheck, st.Cache = c.CacheState, c.Cache
	if !c.CheckedAt.IsZero() {
		at := c.CheckedAt.UTC()
		st.CheckedAt = &at
	}
	if (c.State == canary.Diverges || c.State == canary.CacheDiverges) && c.Position >= 0 {
		pos := c.Position
		st.Position = &pos
	}
	return st
}

// engineVersion is the version the named replica's engine reports. Callers hold mu.
func (p *pool) engineVersion(name string) string {
	if f := p.factsKnown(name); f != nil {
		return f.version
	}
	return ""
}

// diverging: the replica's canary says it answers unlike its group, or unlike itself once
// its cache holds the prompt, so no rerun may move a request to it or from it. Callers hold
// mu.
func (p *pool) diverging(name string) bool {
	f := p.factsKnown(name)
	return p.canary != nil && f != nil && (f.canary.State == canary.Diverges || f.canary.State == canary.CacheDiverges)
}

// canaryExclusion is why the canary keeps the replica from all work, "" when it does not:
// only with exclude_from: all, and only for a replica outvoted by a majority or whose cache
// changes its answers. Callers hold mu.
func (p *pool) canaryExclusion(name string) string {
	f := p.factsKnown(name)
	if p.canary == nil || p.canary.ExcludeFrom != config.CanaryExcludeAll || f == nil {
		return ""
	}
	switch {
	case f.canary.State == canary.Diverges && !f.canary.Tie:
		return "canary: answers unlike its fingerprint group: " + f.canary.Detail
	case f.canary.State == canary.CacheDiverges:
		return "canary: its cache changes its answers: " + f.canary.Detail
	}
	return ""
}

// canaryTarget is one replica to probe, as of the start of a check.
type canaryTarget struct {
	target
	group string // its fingerprint, canonically written
	// engine is its engine kind; block the KV block size its cache check straddles, and
	// blockFrom where that came from (blockOf).
	engine    string
	block     int
	blockFrom string
}

// CheckCanaries runs one canary check on every pool that has one and returns when they
// are done. The background schedule calls the same check; tests call this to run one
// deterministically.
func (s *Server) CheckCanaries(ctx context.Context) {
	s.eachPool(func(p *pool) {
		if p.beginCanary(false, s.now()) {
			s.runCanary(ctx, p)
		}
	})
}

// canaryTickAll starts the checks that are due: scheduled, or asked for by a replica that
// joined. Each runs in the background so that one slow pool delays no other.
func (s *Server) canaryTickAll(ctx context.Context) {
	now := s.now()
	for _, p := range s.current().pools {
		if p.beginCanary(true, now) {
			s.goBackground(func() { s.runCanary(ctx, p) })
		}
	}
}

// beginCanary says whether a check starts now, and marks it running. A scheduled caller
// starts one only when due (the first is due one period after the pool is first seen) or
// kicked; an explicit caller starts one unless one is running.
func (p *pool) beginCanary(scheduled bool, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.canaryRun
	if p.canary == nil || c.running {
		return false
	}
	if scheduled {
		if c.next.IsZero() {
			c.next = now.Add(p.canary.Every.D())
		}
		if !c.kicked && now.Before(c.next) {
			return false
		}
	}
	c.running, c.kicked = true, false
	return true
}

// canaryTargets lists the replicas worth probing, with their fingerprint groups and the
// block sizes of their cache checks (fallbackBlock where the engine reports none). A replica
// kept out by another check (credentials, wrong model, fingerprint mismatch), dead,
// unhealthy or draining is not probed; one kept out only by the canary is, so that it can
// be seen to agree again.
func (p *pool) canaryTargets(now time.Time, fallbackBlock int) []canaryTarget {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []canaryTarget
	for _, r := range p.b.Replicas {
		m := p.members[r.Name]
		if m == nil || m.removed || m.unauthorized != "" || m.wrongModel != "" || m.fpMismatch != "" {
			continue
		}
		switch r.StateAt(now, p.b.Limits) {
		case balance.Dead, balance.Unhealthy, balance.Draining:
			continue
		}
		block, from := p.blockOf(r.Name, fallbackBlock)
		out = append(out, canaryTarget{target: target{name: r.Name, url: r.URL, key: m.key, agentKey: m.agentKey()},
			group: groupKey(r.Fingerprint), engine: m.engineKind(), block: block, blockFrom: from})
	}
	return out
}

// groupKey writes a fingerprint canonically: replicas with equal keys may rerun each
// other's requests, so they must answer alike.
func groupKey(fp map[string]string) string {
	keys := slices.Sorted(maps.Keys(fp))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q;", k, fp[k])
	}
	return b.String()
}

// runCanary probes every replica, judges each fingerprint group, probes those outvoted a
// second time, and records the verdicts.
func (s *Server) runCanary(ctx context.Context, p *pool) {
	p.mu.Lock()
	if p.canary == nil { // a reload took the canary away since the check was begun
		p.canaryRun.running = false
		p.mu.Unlock()
		return
	}
	cfg := *p.canary
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		c := &p.canaryRun
		c.running, c.cycles = false, c.cycles+1
		c.next = s.now().Add(cfg.Every.D())
		p.mu.Unlock()
	}()
	opts := canary.Options{CompareTokens: cfg.CompareTokens, MaxLogprobDistance: cfg.MaxLogprobDistance}
	targets := s.probeAll(ctx, p, cfg, p.canaryTargets(s.now(), cfg.CacheBlockSize))
	if ctx.Err() != nil {
		return
	}
	groups := map[string]map[string]canary.Answer{}
	byName := map[string]canaryTarget{}
	for _, t := range targets {
		if groups[t.group] == nil {
			groups[t.group] = map[string]canary.Answer{}
		}
		groups[t.group][t.name] = t.answer
		byName[t.name] = t.canaryTarget
	}
	now := s.now()
	verdicts := map[string]canaryResult{}
	for _, answers := range groups {
		vote := canary.Judge(answers, opts)
		for _, n := range vote.Failed {
			verdicts[n] = canaryResult{State: canary.Unknown, CheckedAt: now, Detail: "probe failed: " + answers[n].Err, Position: -1}
		}
		if len(answers)-len(vote.Failed) < 2 {
			for n, a := range answers {
				if a.Err == "" {
					verdicts[n] = canaryResult{State: canary.Unknown, CheckedAt: now, Position: -1,
						Detail: "no other replica with this fingerprint answered the probe"}
				}
			}
			continue
		}
		for _, n := range vote.Majority {
			verdicts[n] = canaryResult{State: canary.Agrees, CheckedAt: now, Position: -1}
		}
		// A replica outvoted once may have met a batch-size effect: ask it again, and
		// judge the second answer the same way.
		var again []canaryTarget
		for n := range vote.Dissent {
			again = append(again, byName[n])
		}
		retried := map[string]canary.Answer{}
		for _, t := range s.probeAll(ctx, p, cfg, again) {
			retried[t.name] = t.answer
		}
		if vote.Tie {
			// No majority: the second answers are judged among themselves; if they all
			// agree now, the split was passing.
			if v2 := canary.Judge(retried, opts); len(v2.Dissent) == 0 && len(v2.Failed) == 0 && len(v2.Majority) >= 2 {
				for n := range vote.Dissent {
					verdicts[n] = canaryResult{State: canary.Agrees, CheckedAt: now, Position: -1,
						Detail: "disagreed once, agreed when probed again"}
				}
				continue
			}
			for n, d := range vote.Dissent {
				verdicts[n] = canaryResult{State: canary.Diverges, CheckedAt: now, Tie: true, Position: d.Position,
					Text: answers[n].Text, Majority: answers[otherOf(vote, answers, opts, n)].Text,
					Detail: "its group has no majority answer: " + canary.Evidence(d, answers[n], answers[otherOf(vote, answers, opts, n)])}
			}
			continue
		}
		ref := answers[vote.Reference]
		for n, d := range vote.Dissent {
			if second, ok := retried[n]; ok && second.Err == "" && canary.Compare(ref, second, opts).Same {
				verdicts[n] = canaryResult{State: canary.Agrees, CheckedAt: now, Position: -1,
					Detail: "disagreed once, agreed when probed again"}
				continue
			}
			verdicts[n] = canaryResult{State: canary.Diverges, CheckedAt: now, Position: d.Position, Text: answers[n].Text,
				Majority: ref.Text, Detail: canary.Evidence(d, answers[n], ref)}
		}
	}
	if cfg.CacheChecked() {
		// Every replica whose probe was answered checks its own cache, whatever its group
		// said: a replica alone in its group can still be compared with itself.
		var answered []canaryTarget
		for _, t := range targets {
			if t.answer.Err == "" {
				answered = append(answered, t.canaryTarget)
			}
		}
		for n, c := range s.checkCaches(ctx, p, cfg, answered) {
			verdicts[n] = withCache(verdicts[n], c)
		}
		if ctx.Err() != nil {
			return
		}
	}
	s.recordCanary(p, cfg, verdicts)
}

// otherOf is a replica that answered otherwise than n in a tied vote, for its evidence.
func otherOf(v canary.Vote, answers map[string]canary.Answer, opts canary.Options, n string) string {
	for _, m := range slices.Sorted(maps.Keys(v.Dissent)) {
		if m != n && !canary.Compare(answers[m], answers[n], opts).Same {
			return m
		}
	}
	return n
}

// recordCanary stores the verdicts, updates who is kept out, and logs every change. A
// replica whose probe failed keeps a diverges verdict: failing to answer proves nothing.
func (s *Server) recordCanary(p *pool, cfg config.Canary, verdicts map[string]canaryResult) {
	names := slices.Sorted(maps.Keys(verdicts))
	p.mu.Lock()
	type change struct {
		name     string
		old, new canaryResult
	}
	var changes []change
	for _, n := range names {
		if p.b.Find(n) == nil {
			continue
		}
		f := p.factsOf(n)
		v := verdicts[n]
		if v.State == canary.Unknown && f.canary.State == canary.Diverges && strings.HasPrefix(v.Detail, "probe failed") {
			f.canary.CheckedAt, f.canary.Detail = v.CheckedAt, v.Detail+" (still diverging: "+f.canary.Detail+")"
			continue
		}
		if cfg.CacheChecked() && f.canary.State == canary.CacheDiverges && v.State != canary.Diverges &&
			v.CacheState != canary.Agrees && v.CacheState != canary.CacheDiverges {
			// The cache check failed or could not run: failing to answer proves nothing.
			f.canary.CheckedAt, f.canary.Detail = v.CheckedAt, "cache check not completed (still diverging: "+f.canary.Detail+")"
			continue
		}
		old := f.canary
		f.canary = v
		p.updateIncompatible(n)
		// Prefix affinity stops counting on a cache that changes answers.
		p.b.Find(n).NoAffinity = v.State == canary.CacheDiverges
		if old.State != v.State {
			changes = append(changes, change{n, old, v})
		}
	}
	p.mu.Unlock()
	for _, c := range changes {
		switch c.new.State {
		case canary.CacheDiverges:
			e := c.new.Cache
			s.log.Warn("replica answers otherwise when its prompt prefix comes from its cache; kept from "+cfg.ExcludeFrom,
				"model", p.b.Model, "replica", c.name, "prompt_tokens", e.PromptTokens, "block_size", e.BlockSize,
				"first_differing_token", e.Position, "cold_answer", e.Cold, "warm_answer", e.Warm, "detail", c.new.Detail)
		case canary.Diverges:
			s.log.Warn("replica answers unlike its fingerprint group; kept from "+cfg.ExcludeFrom,
				"model", p.b.Model, "replica", c.name, "first_differing_token", c.new.Position,
				"answer", c.new.Text, "majority_answer", c.new.Majority, "detail", c.new.Detail)
		case canary.Agrees:
			switch c.old.State {
			case canary.Diverges:
				s.log.Info("replica answers as its fingerprint group again", "model", p.b.Model, "replica", c.name)
			case canary.CacheDiverges:
				s.log.Info("replica answers alike with and without its cache again", "model", p.b.Model, "replica", c.name)
			}
		}
	}
}

// probed is a target and its answer.
type probed struct {
	canaryTarget
	answer canary.Answer
}

// probeAll sends the probe to every target at once.
func (s *Server) probeAll(ctx context.Context, p *pool, cfg config.Canary, targets []canaryTarget) []probed {
	out := make([]probed, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = probed{t, s.probeReplica(ctx, p.b.Model, cfg, t.target)}
		}()
	}
	wg.Wait()
	return out
}

// probeReplica asks one replica the probe: a chat completion at temperature 0 with a fixed
// seed, a short answer and its logprobs, marked as the canary's.
func (s *Server) probeReplica(ctx context.Context, model string, cfg config.Canary, tg target) canary.Answer {
	b, err := s.canaryPost(ctx, tg, "/v1/chat/completions", map[string]any{
		"model":       model,
		"messages":    []map[string]string{{"role": "user", "content": cfg.Prompt}},
		"temperature": 0,
		"seed":        canarySeed,
		"max_tokens":  cfg.MaxTokens,
		"logprobs":    true,
		"stream":      false,
		"user":        canaryUser,
	}, "")
	if err != nil {
		return canary.Answer{Err: err.Error()}
	}
	choice := gjson.GetBytes(b, "choices.0")
	if !choice.Exists() {
		return canary.Answer{Err: "no choice in the answer"}
	}
	a := canary.Answer{Text: choice.Get("message.content").String()}
	choice.Get("logprobs.content").ForEach(func(_, t gjson.Result) bool {
		a.Tokens = append(a.Tokens, t.Get("token").String())
		a.Logprobs = append(a.Logprobs, t.Get("logprob").Float())
		return true
	})
	return a
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// canaryDesc is fencegate_replica_canary: 1 for the replica's current canary state.
var canaryDesc = prometheus.NewDesc("fencegate_replica_canary",
	"1 for the replica's current consistency canary state (agrees, diverges, cache_diverges, unknown); pools without a canary report none.",
	[]string{"model", "replica", "state"}, nil)

// canaryCollector reports every replica's canary state at scrape time.
type canaryCollector struct{ s *Server }

func (c canaryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- canaryDesc }

func (c canaryCollector) Collect(ch chan<- prometheus.Metric) {
	for name, p := range c.s.current().pools {
		p.mu.Lock()
		if p.canary != nil {
			rs := make([]string, 0, len(p.b.Replicas))
			for _, r := range p.b.Replicas {
				rs = append(rs, r.Name)
			}
			sort.Strings(rs)
			for _, r := range rs {
				state := p.canaryStatus(r).State
				for _, st := range []string{canary.Agrees, canary.Diverges, canary.CacheDiverges, canary.Unknown} {
					v := 0.0
					if st == state {
						v = 1
					}
					ch <- prometheus.MustNewConstMetric(canaryDesc, prometheus.GaugeValue, v, name, r, st)
				}
			}
		}
		p.mu.Unlock()
	}
}

// startCanaries registers the canary's metric and starts its schedule.
func (s *Server) startCanaries(ctx context.Context) {
	_ = s.metrics.reg.Register(canaryCollector{s: s}) // a second Start registers nothing new
	s.goBackground(func() { every(ctx, canaryTick, s.canaryTickAll) })
}
