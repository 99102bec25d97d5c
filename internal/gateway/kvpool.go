package gateway

import (
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/kvevents"
)

// kvMember is what the gateway keeps of a replica whose engine publishes KV events (the
// precise mode, docs/design.md "Placement"): where they are, the tracker of what they say
// (pure; under the pool's lock) and the subscription that reads them (kvsubscribe.go).
type kvMember struct {
	cfg     config.KVEvents // resolved for the replica ({host} replaced)
	tracker *kvevents.Tracker
	sub     *kvSubscription // nil until the gateway's background work starts
}

// configureKV gives member m (replica name at url) the KV events configuration cfg (nil:
// none), keeping its tracker and subscription when nothing changed. Callers hold mu.
func (p *pool) configureKV(m *member, url string, own *config.KVEvents) {
	cfg := own
	if cfg == nil {
		cfg = p.kvEvents
	}
	if cfg == nil || !p.b.Limits.CacheAware {
		p.stopKV(m)
		return
	}
	want := cfg.For(url)
	if m.kv != nil && m.kv.cfg == want {
		return
	}
	p.stopKV(m)
	m.kv = &kvMember{cfg: want, tracker: kvevents.NewTracker(balance.PrefixBlockBytes, want.LateAfter.D())}
	m.kv.tracker.SetCacheTokens(m.cacheTokens)
}

// stopKV ends m's subscription and forgets its events: its record is sized as without
// them. Callers hold mu.
func (p *pool) stopKV(m *member) {
	if m.kv == nil {
		return
	}
	if m.kv.sub != nil {
		m.kv.sub.stop()
	}
	m.kv = nil
	for _, r := range p.b.Replicas {
		if p.members[r.Name] == m {
			p.sizeRecord(r, m)
		}
	}
}

// startKVSubscriptions starts the subscriptions the pool's replicas lack, once the
// gateway's background work runs. Callers hold mu.
func (p *pool) startKVSubscriptions(s *Server) {
	if s.backgroundCtx == nil {
		return
	}
	for name, m := range p.members {
		if m.kv != nil && m.kv.sub == nil {
			m.kv.sub = s.subscribeKV(p, name, m.kv)
		}
	}
}

// sizeRecord sets r's record capacity: the engine's cache at the learned bytes a token
// when its events are trusted (Tracker.Precise), else the generous size the engine's cache
// gives without events. Callers hold mu.
func (p *pool) sizeRecord(r *balance.Replica, m *member) {
	if r.Prefix == nil || m == nil {
		return
	}
	n := m.generousBlocks
	if n == 0 {
		n = defaultPrefixBlocks
	}
	if m.kv != nil {
		if c, ok := m.kv.tracker.Capacity(m.cacheTokens); ok {
			n = min(c, maxPrefixBlocks)
		}
	}
	r.Prefix.Capacity = n
	r.Prefix.Trim()
}

// kvChange is a change of a replica's KV event state, to log.
type kvChange struct {
	replica string
	state   kvevents.State
	reason  string
}

// kvReceive hands a batch of sub's replica to its tracker and applies what it asks of the
// record; see kvevents.Tracker.Receive. A subscription that is no longer the replica's
// gets nothing done (ReplayFrom -1).
func (p *pool) kvReceive(sub *kvSubscription, seq int64, b kvevents.Batch, now time.Time, final bool) (kvevents.Effects, *kvChange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, m := p.kvOf(sub)
	if m == nil {
		return kvevents.Effects{ReplayFrom: -1}, nil
	}
	fx := m.kv.tracker.Receive(seq, b, now, final)
	return fx, p.applyKV(r, m, fx)
}

// kvReplayed hands a replayed batch to the tracker.
func (p *pool) kvReplayed(sub *kvSubscription, seq int64, b kvevents.Batch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, m := p.kvOf(sub); m != nil {
		p.applyKV(r, m, m.kv.tracker.Replayed(seq, b))
	}
}

// kvLastSeq is the last batch applied of sub's replica (-1: none).
func (p *pool) kvLastSeq(sub *kvSubscription) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, m := p.kvOf(sub); m != nil {
		return m.kv.tracker.LastSeq()
	}
	return -1
}

// kvCheck degrades sub's replica if its events are late at now.
func (p *pool) kvCheck(sub *kvSubscription, now time.Time) *kvChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, m := p.kvOf(sub)
	if m == nil || !m.kv.tracker.Check(now) {
		return nil
	}
	return p.applyKV(r, m, kvevents.Effects{Changed: true})
}

// kvDown degrades sub's replica: its subscription is down.
func (p *pool) kvDown(sub *kvSubscription, why string) *kvChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, m := p.kvOf(sub)
	if m == nil || !m.kv.tracker.Down(why) {
		return nil
	}
	return p.applyKV(r, m, kvevents.Effects{Changed: true})
}

// kvOf finds sub's replica, if sub is still its subscription. Callers hold mu.
func (p *pool) kvOf(sub *kvSubscription) (*balance.Replica, *member) {
	m := p.members[sub.replica]
	r := p.b.Find(sub.replica)
	if m == nil || r == nil || m.kv == nil || m.kv.sub != sub {
		return nil, nil
	}
	return r, m
}

// applyKV does to r's record what fx asks. Callers hold mu.
func (p *pool) applyKV(r *balance.Replica, m *member, fx kvevents.Effects) *kvChange {
	if r.Prefix != nil {
		if fx.Clear {
			r.Prefix.Clear()
		}
	}
	p.sizeRecord(r, m)
	if !fx.Changed {
		return nil
	}
	st, why := m.kv.tracker.State()
	return &kvChange{replica: r.Name, state: st, reason: why}
}

// kvState is the state of the named replica's KV events. Callers hold mu.
func (p *pool) kvState(name string) (kvevents.State, string) {
	m := p.members[name]
	if m == nil || m.kv == nil {
		return kvevents.Off, ""
	}
	return m.kv.tracker.State()
}

// logKV logs a change of a replica's KV event state.
func (s *Server) logKV(model string, c *kvChange) {
	if c == nil {
		return
	}
	if c.state == kvevents.Live {
		s.log.Info("replica's KV events are live: its prompt record follows its engine's cache", "model", model, "replica", c.replica)
		return
	}
	s.log.Warn("replica's KV events degraded: its prompt record is sized as without them", "model", model,
		"replica", c.replica, "reason", c.reason)
}

// kvEventsStatus is a replica's KV events as /readyz reports them.
type kvEventsStatus struct {
	Endpoint string `json:"endpoint"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	// LastSeq is the last batch applied (-1: none); EngineBlocks the blocks the engine
	// holds as its events since the last resync say.
	LastSeq      int64 `json:"last_seq"`
	EngineBlocks int   `json:"engine_blocks"`
	// BytesPerToken is the learned bytes of the prompt record a token of the engine's
	// cache stands for (0: not learned yet); RecordCapacity the record's capacity now.
	BytesPerToken  float64 `json:"bytes_per_token,omitempty"`
	RecordCapacity int     `json:"record_capacity"`
}

// kvStatus is r's KV events for /readyz (nil: none). Callers hold mu.
func (p *pool) kvStatus(r *balance.Replica) *kvEventsStatus {
	m := p.members[r.Name]
	if m == nil || m.kv == nil {
		return nil
	}
	t := m.kv.tracker
	st, why := t.State()
	bpt, _ := t.BytesPerToken()
	out := &kvEventsStatus{Endpoint: m.kv.cfg.Endpoint, State: st.String(), Reason: why, LastSeq: t.LastSeq(),
		EngineBlocks: t.Resident(), BytesPerToken: bpt}
	if r.Prefix != nil {
		out.RecordCapacity = r.Prefix.Capacity
	}
	return out
}
