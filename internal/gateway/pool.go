package gateway

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/request"
)

// pool is a balance.Pool, its retry budget and what it knows of each replica behind one
// lock. Its replicas may change while it serves (a reload, DNS discovery): see reconcile.
type pool struct {
	mu     sync.Mutex
	b      balance.Pool
	budget *failover.RetryBudget
	// members is what the gateway keeps of each replica besides its balance state (b's
	// replica of the same name): one entry per replica, added and removed with it.
	members map[string]*member
	// affinityBytes is the prompt prefix length that gives a request affinity (<= 0: none).
	// A reload changes it: under mu (affinityPrefix).
	affinityBytes int
	allowCross    bool
	prefixes      *prefixMemory
	// kvEvents is the model's kv_events (nil: none), for replicas that set none.
	kvEvents *config.KVEvents
	// discovery, when the pool finds replicas in DNS, stops its loop; dnsNames are the
	// names its last round gave the addresses it found (see nameReplicas).
	discovery context.CancelFunc
	dnsNames  map[netip.Addr]string
	// canary is the pool's consistency check, nil when off; its schedule is in canaryRun.
	canary    *config.Canary
	canaryRun canarySchedule
	// requests is the pool as its requests see it (requestpool.go).
	requests request.Pool
	// noneAnnounced: the pool's having no healthy replica was logged, and none came back
	// since (announce.go).
	noneAnnounced bool
	// queue holds the requests that wait for a slot (queue.go); srv is the gateway, whose
	// metrics count them.
	queue poolQueue
	srv   *Server
}

// member is one replica as the gateway knows it besides its balance state. The pool's lock
// guards it.
type member struct {
	engine string     // as configured ("" : found from its metrics)
	key    string     // the engine's API key
	link   *agentLink // its agent (fenced mode), or nil
	source string     // "config" or "dns": which list it came from
	// removed: it left the configuration or DNS; it drains and goes once idle.
	removed bool
	// configured is its fingerprint as configured (discovery is checked against it; b's
	// Replica.Fingerprint is the effective one); detected is the engine its metrics tell.
	configured map[string]string
	detected   string
	// Why it is kept out, per check (empty: agrees). unauthorized: it refused the gateway's
	// credentials (401/403), and stays out until an authenticated check of it succeeds.
	wrongModel, fpMismatch, unauthorized string
	// facts is what its engine, agent and canary told (facts.go, canary.go); nil until one
	// of them did.
	facts *replicaFacts
	// probeFailed: its last probe failed (or it joined unprobed), so a passing one means
	// it (re)joins, which the canary checks at once.
	probeFailed bool
	// running holds the attempts on it, so that a replica declared dead can have them
	// failed at once.
	running map[*request.Attempt]struct{}
	// announced: it was logged as found healthy (announce.go).
	announced bool
	// kv is its KV event subscription and tracker (kvpool.go), nil without kv_events.
	kv *kvMember
	// cacheTokens is its engine's cache in tokens (num_gpu_blocks × block_size; 0: not
	// said), and generousBlocks the record capacity it gives without events (0: not said).
	cacheTokens    int64
	generousBlocks int
}

// replicaSpec is a replica as a configuration or a DNS answer describes it.
type replicaSpec struct {
	config.Replica
	key string
}

func newPool(m config.Model, c *config.Config, now time.Time) *pool {
	p := &pool{
		b:        balance.Pool{Model: m.Name},
		prefixes: newPrefixMemory(100_000),
		members:  make(map[string]*member),
	}
	p.configure(m, c)
	rb := c.Policy.RetryBudget
	p.budget = failover.NewRetryBudget(*rb.Ratio, *rb.MinPerSecond, *rb.Burst, now)
	return p
}

// configure applies a model's pool-wide settings (at start and on reload).
func (p *pool) configure(m config.Model, c *config.Config) {
	p.b.Cooldown = c.Health.DeadCooldown.D()
	p.b.EjectAfter = max(c.Health.EjectAfter, 0)
	p.b.Limits = balance.Limits{MaxOutstanding: m.MaxOutstanding, MaxQueue: max(m.MaxQueue, 0),
		StaleAfter: 5 * c.Health.ScrapeEvery.D(), AffinityBound: m.Affinity.LoadBound, AffinitySlack: max(m.Affinity.LoadSlack, 0)}
	if m.Affinity.PrefixBytes < 0 {
		p.b.Limits.AffinityBound = 0
	}
	p.b.Limits.CacheAware = m.Affinity.Policy == config.AffinityCacheAware && m.Affinity.PrefixBytes >= 0
	p.affinityBytes = m.Affinity.PrefixBytes
	p.allowCross = c.Policy.AllowCrossFingerprintRerun
	p.canary = m.Canary
	p.kvEvents = m.KVEvents
	p.configureQueue(m.Queue.MaxWait.D(), m.Queue.MaxLen)
	for _, r := range p.b.Replicas {
		// A canary taken away no longer distrusts any replica's cache.
		r.NoAffinity = p.canary != nil && r.NoAffinity
	}
}

// reconcile makes the pool's replicas from source ("config" or "dns") those of specs.
// Replicas that are new join (waiting for a passing probe unless probed); replicas that
// remain take their new settings (running attempts keep what they started with); replicas
// that are gone drain — no new work, running requests finish — and are removed once idle.
// Replicas of the other source are left alone.
func (p *pool) reconcile(s *Server, source string, specs []replicaSpec, probed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := make(map[string]bool, len(specs))
	for _, sp := range specs {
		want[sp.Name] = true
		fp := maps.Clone(sp.Fingerprint)
		if fp == nil {
			fp = map[string]string{}
		}
		m := p.members[sp.Name]
		r := p.b.Find(sp.Name)
		if m == nil || r == nil {
			r = &balance.Replica{Name: sp.Name, URL: sp.URL, Priority: sp.Priority, Fingerprint: maps.Clone(fp),
				Prefix: balance.NewPrefixRecord(defaultPrefixBlocks)}
			p.b.Add(r, probed)
			m = &member{source: source, running: make(map[*request.Attempt]struct{})}
			p.members[sp.Name] = m
			if !probed {
				s.log.Info("replica joins", "model", p.b.Model, "replica", sp.Name, "url", sp.URL, "from", source)
				m.probeFailed = true // its first passing probe is its joining
			}
		} else {
			if r.URL != sp.URL {
				// Another endpoint under the same name (a StatefulSet's pod back with a new
				// address): another engine, which passes a probe before it gets work.
				s.log.Info("replica moves", "model", p.b.Model, "replica", sp.Name, "from", r.URL, "url", sp.URL, "source", source)
				p.b.ProbeResult(r, false, "moved to "+sp.URL+"; waiting for its first health probe")
				m.probeFailed = true
			}
			r.URL, r.Priority = sp.URL, sp.Priority
			if m.removed {
				m.removed = false
				p.b.SetDraining(r, false, "")
			}
		}
		m.configured = fp
		m.engine, m.key, m.source = sp.Engine, sp.key, source
		p.configureKV(m, sp.URL, sp.KVEvents)
		switch {
		case sp.Agent && (m.link == nil || m.link.url != sp.URL):
			m.link = s.newAgentLink(p, sp.Name, sp.URL)
		case !sp.Agent:
			m.link = nil
		}
	}
	for name, m := range p.members {
		if m.source != source || want[name] || m.removed {
			continue
		}
		m.removed = true
		if r := p.b.Find(name); r != nil {
			p.b.SetDraining(r, true, "removed from the "+source+"; draining")
		}
		s.log.Info("replica leaves; it drains", "model", p.b.Model, "replica", name, "from", source)
		p.dropIfIdle(name)
	}
	p.startKVSubscriptions(s)
}

// namesNotFrom returns the names of the replicas that came from other sources than
// source and have not left. Callers hold mu.
func (p *pool) namesNotFrom(source string) map[string]bool {
	out := make(map[string]bool)
	for name, m := range p.members {
		if m.source != source && !m.removed {
			out[name] = true
		}
	}
	return out
}

// dropIfIdle removes a replica that left once nothing runs on it. Callers hold mu.
func (p *pool) dropIfIdle(name string) {
	m := p.members[name]
	r := p.b.Find(name)
	if m == nil || !m.removed || (r != nil && r.Outstanding > 0) {
		return
	}
	p.stopKV(m)
	p.b.Remove(name)
	delete(p.members, name)
}

// links returns the agent links of the pool's replicas.
func (p *pool) links() []*agentLink {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*agentLink
	for _, m := range p.members {
		if m.link != nil {
			out = append(out, m.link)
		}
	}
	return out
}

// acquire picks a replica for attempt a as w asks and registers a on it. A rerun goes only
// to a replica the request has not tried, with the fingerprint of its first attempt that
// reached a replica (unless allowed otherwise). When every replica is at its capacity, a
// waits in the pool's queue if the pool has one (queue.go).
func (p *pool) acquire(now time.Time, w *request.Want, a *request.Attempt) (request.Pick, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.choose(now, w)
	if c.Replica == nil {
		if c.Shed && !p.queue.off && p.knowsCapacity() {
			return p.enqueue(now, w, a), false
		}
		return request.Pick{Shed: c.Shed, Pinned: w.Pinned != ""}, false
	}
	return p.take(c.Replica, a, w.Blocks), true
}

// choose picks the replica for w, without taking it. Callers hold mu.
func (p *pool) choose(now time.Time, w *request.Want) balance.Choice {
	// A rerun stays within the fingerprint of the first attempt that reached a replica
	// (one that never did ran nothing there).
	var first *balance.Replica
	for _, info := range w.Attempts {
		if !info.Dial {
			first = p.b.Find(info.Replica)
			break
		}
	}
	exclude := func(r *balance.Replica) bool {
		if w.Pinned != "" && r.Name != w.Pinned {
			return true // the request's state lives on its pinned replica only
		}
		return failover.Tried(w.Attempts, r.Name) || (first != nil && !p.allowCross && (!balance.Compatible(first, r) ||
			p.diverging(first.Name) || p.diverging(r.Name)))
	}
	return p.b.PickPrompt(now, exclude, w.Affinity, w.Blocks)
}

// take counts attempt a on r and returns it as a request's pick; blocks are the prompt's
// (balance.PrefixBlocks), which r will hold once it has prefilled them. They are recorded
// here, under the same lock as the choice, not once the attempt is on its way: requests
// that arrive together with a prompt new to the pool (an application's first
// conversations) must see where the first of them went, or they spread it over every
// replica. Callers hold mu.
func (p *pool) take(r *balance.Replica, a *request.Attempt, blocks []uint64) request.Pick {
	m := p.members[r.Name]
	if p.b.Limits.CacheAware && r.Prefix != nil {
		// The next turn of the conversation finds its history here.
		added, _ := r.Prefix.Insert(blocks)
		if m.kv != nil && p.srv != nil {
			m.kv.tracker.Recorded(added*balance.PrefixBlockBytes, p.srv.now())
		}
	}
	r.Outstanding++
	r.PeakOutstanding = max(r.PeakOutstanding, r.Outstanding)
	m.running[a] = struct{}{}
	engine := m.engineKind()
	pk := request.Pick{Replica: r.Name, URL: r.URL, Revision: r.Fingerprint["revision"], Key: m.key,
		UsagePerChunk: engine == "vllm" || engine == "sglang", ClosesStreams: engine == "llamacpp"}
	if m.link != nil {
		pk.Agent = m.link
	}
	return pk
}

// untake undoes take for an attempt that will never run. Callers hold mu.
func (p *pool) untake(r *balance.Replica, a *request.Attempt) {
	r.Outstanding = max(r.Outstanding-1, 0)
	if m := p.members[r.Name]; m != nil {
		delete(m.running, a)
	}
}

// release ends attempt a on its replica and tells the replica's balance state how the
// attempt ended (info, the machine's record of it: dispatched false when it never was),
// which may eject the replica (balance.Pool.AttemptFailed). It is called on the request's
// owner goroutine.
func (p *pool) release(s *Server, a *request.Attempt, info failover.AttemptInfo, dispatched bool) {
	name := a.Replica()
	p.mu.Lock()
	m := p.members[name]
	registered := false
	if m != nil {
		_, registered = m.running[a]
	}
	var ej balance.Ejection
	r := p.b.Find(name)
	if r != nil {
		if r.Outstanding > 0 {
			r.Outstanding--
		}
		if registered && dispatched && info.Replica == r.Name {
			ej = p.attemptEnded(s, r, info)
		}
	}
	if m != nil {
		delete(m.running, a)
	}
	p.dropIfIdle(name)
	p.grantWaiting(s.now()) // its slot may be free: the next waiter takes it
	model, ejectAfter := p.b.Model, p.b.EjectAfter
	p.mu.Unlock()
	if registered {
		s.reportEjection(model, name, ejectAfter, ej)
	}
}

// attemptEnded tells r's balance state how a dispatched attempt on it ended. Callers hold
// mu.
func (p *pool) attemptEnded(s *Server, r *balance.Replica, info failover.AttemptInfo) balance.Ejection {
	switch replicaBlame(info) {
	case attemptCompleted:
		p.b.AttemptCompleted(r)
	case attemptFailed:
		return p.b.AttemptFailed(r, s.now(), string(info.EndReason))
	}
	return balance.Ejection{}
}

// blame is what an attempt's end says of its replica.
type blame uint8

const (
	attemptNeutral   blame = iota // nothing: the client, the gateway or the request ended it
	attemptCompleted              // it works: its run of failures ends
	attemptFailed                 // it failed the attempt: one more consecutive failure
)

// replicaBlame decides whether an ended attempt counts for or against its replica's run of
// consecutive failures. Against: the attempt reached the replica and ended dead or
// uncertain (reset or closed connections, engine 5xx, TGI's 424, engine error events,
// malformed or oversized streams, stalls). Neither: a dial failure (MarkDialFailed keeps
// the replica out), an overload (its Retry-After does), the engine rejecting the request
// (the input's fault), the client leaving or stalling, the gateway ending it (a request
// deadline, lost ownership, the journal), an operator declaring the replica dead or its
// agent's heartbeat lost (both keep it out already).
func replicaBlame(info failover.AttemptInfo) blame {
	if info.Ended.IsZero() {
		return attemptNeutral
	}
	switch info.Failure {
	case 0:
		if info.EndReason == failover.EndCompleted {
			return attemptCompleted
		}
	case failover.Dead, failover.Uncertain:
		if !info.Dial && info.EndReason != failover.EndReplicaDeclaredDead && info.EndReason != failover.EndAgentUnreachable {
			return attemptFailed
		}
	}
	return attemptNeutral
}

// reportEjection logs and counts what an attempt's end did to its replica: an ejection,
// or one held back because no other replica was healthy (logged once every ejectAfter
// failures, so a long run of them does not flood the log).
func (s *Server) reportEjection(model, replica string, ejectAfter int, e balance.Ejection) {
	switch {
	case e.Ejected:
		s.metrics.ejections.WithLabelValues(model, replica).Inc()
		s.log.Warn("replica ejected", "model", model, "replica", replica, "failures", e.Failures,
			"reason", e.Last, "for", e.For.String(), "until", e.Until)
	case e.Held:
		s.metrics.ejectionsHeld.WithLabelValues(model, replica).Inc()
		if ejectAfter > 0 && e.Failures%ejectAfter == 0 {
			s.log.Warn("replica not ejected: no other replica of its pool is healthy", "model", model, "replica", replica,
				"failures", e.Failures, "reason", e.Last)
		}
	}
}

// with runs f on the named replica under the lock.
func (p *pool) with(name string, f func(*balance.Replica)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.b.Find(name)
	if r != nil {
		f(r)
	}
	return r != nil
}

func (p *pool) dialFailed(name string, now time.Time, reason failover.EndReason) {
	p.with(name, func(r *balance.Replica) { p.b.MarkDialFailed(r, now, string(reason)) })
}

func (p *pool) overloaded(name string, until time.Time, reason failover.EndReason) {
	p.with(name, func(r *balance.Replica) { p.b.MarkOverloaded(r, until, string(reason)) })
}

func (p *pool) probeResult(name string, ok bool, reason string) {
	p.with(name, func(r *balance.Replica) {
		defer p.grantWaitingNow()
		p.b.ProbeResult(r, ok, reason)
		m := p.members[name]
		if m == nil {
			return
		}
		if ok && m.probeFailed {
			p.canaryRun.kicked = true // it (re)joins: check that it answers as its group
		}
		m.probeFailed = !ok
	})
}

func (p *pool) onRequest(now time.Time) {
	p.mu.Lock()
	p.budget.OnRequest(now)
	p.mu.Unlock()
}

// tryRerun withdraws one rerun from the pool's retry budget if it has one: the answer to a
// machine's ActTryRerun.
func (p *pool) tryRerun(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.budget.TryRerun(now)
}

// attemptsOn lists the attempts running on the named replica.
func (p *pool) attemptsOn(name string) []*request.Attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[name]
	if m == nil {
		return nil
	}
	return slices.Collect(maps.Keys(m.running))
}

// replicaStatus is one replica as /readyz reports it.
type replicaStatus struct {
	Name        string            `json:"name"`
	URL         string            `json:"url"`
	Priority    int               `json:"priority"`
	State       string            `json:"state"`
	Reason      string            `json:"reason,omitempty"`
	Outstanding int               `json:"outstanding"`
	Peak        int               `json:"peak_outstanding"`
	Running     int               `json:"engine_running"`
	Waiting     int               `json:"engine_waiting"`
	KVUsage     float64           `json:"engine_kv_usage"`
	Fingerprint map[string]string `json:"fingerprint,omitempty"`
	// EngineVersion is the version the engine reports (never compared).
	EngineVersion string        `json:"engine_version,omitempty"`
	Canary        *canaryStatus `json:"canary,omitempty"`
	// KVEvents is what its engine's KV events say, when it has kv_events.
	KVEvents *kvEventsStatus `json:"kv_events,omitempty"`
	// ConsecutiveFailures counts the attempts that failed on the replica since its last
	// completed one; EjectedUntil is when its ejection ends, while it is ejected.
	ConsecutiveFailures int        `json:"consecutive_failures,omitempty"`
	EjectedUntil        *time.Time `json:"ejected_until,omitempty"`
}

func (p *pool) status(now time.Time) (list []replicaStatus, available int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.b.Replicas {
		st := r.StateAt(now, p.b.Limits)
		if st == balance.Healthy {
			available++
		}
		rs := replicaStatus{Name: r.Name, URL: r.URL, Priority: r.Priority, State: st.String(), Reason: r.ReasonAt(now),
			Outstanding: r.Outstanding, Peak: r.PeakOutstanding, Running: r.Load.Running, Waiting: r.Load.Waiting, KVUsage: r.Load.KVUsage,
			Fingerprint: maps.Clone(r.Fingerprint), EngineVersion: p.engineVersion(r.Name), Canary: p.canaryStatus(r.Name),
			ConsecutiveFailures: r.ConsecutiveFailures()}
		if ejected, until := r.Ejected(now); ejected {
			rs.EjectedUntil = &until
		}
		rs.KVEvents = p.kvStatus(r)
		list = append(list, rs)
	}
	return list, available
}

// retryAfter is the number of seconds after which a replica of the pool waiting out a dial
// failure, an ejection or an engine's "busy" is expected back (at least 1, at most 60), for
// the Retry-After of a request no replica could take.
func (p *pool) retryAfter(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queue.q.Len() > 0 {
		return p.queueRetryAfter(now)
	}
	soonest := time.Time{}
	for _, r := range p.b.Replicas {
		if t := r.AvailableAt(now); !t.IsZero() && (soonest.IsZero() || t.Before(soonest)) {
			soonest = t
		}
	}
	if soonest.IsZero() {
		return 1
	}
	return min(max(int((soonest.Sub(now)+time.Second-1)/time.Second), 1), 60)
}
