package gateway

import (
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/failover"
)

// pool is a balance.Pool and its retry budget behind one lock.
type pool struct {
	mu     sync.Mutex
	b      balance.Pool
	budget *failover.RetryBudget
}

func newPool(m config.Model, c *config.Config, now time.Time) *pool {
	p := &pool{b: balance.Pool{Model: m.Name, Cooldown: c.Health.DeadCooldown.D()}}
	for _, r := range m.Replicas {
		p.b.Replicas = append(p.b.Replicas, &balance.Replica{Name: r.Name, URL: r.URL, Priority: r.Priority})
	}
	rb := c.Policy.RetryBudget
	p.budget = failover.NewRetryBudget(*rb.Ratio, *rb.MinPerSecond, *rb.Burst, now)
	return p
}

// acquire picks a replica for an attempt and counts it as outstanding. It returns the
// replica's name and URL, and ok=false when none is available.
func (p *pool) acquire(now time.Time, exclude func(string) bool) (name, url string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.b.Pick(now, exclude)
	if r == nil {
		return "", "", false
	}
	r.Outstanding++
	return r.Name, r.URL, true
}

// release ends an outstanding attempt on the named replica.
func (p *pool) release(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.b.Find(name); r != nil && r.Outstanding > 0 {
		r.Outstanding--
	}
}

func (p *pool) dialFailed(name string, now time.Time, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.b.Find(name); r != nil {
		p.b.MarkDialFailed(r, now, reason)
	}
}

func (p *pool) probeResult(name string, ok bool, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.b.Find(name); r != nil {
		p.b.ProbeResult(r, ok, reason)
	}
}

func (p *pool) onRequest(now time.Time) {
	p.mu.Lock()
	p.budget.OnRequest(now)
	p.mu.Unlock()
}

// TryRerun implements failover.Budget.
func (p *pool) TryRerun(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.budget.TryRerun(now)
}

// replicaStatus is one replica as /readyz reports it.
type replicaStatus struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Priority    int    `json:"priority"`
	State       string `json:"state"`
	Reason      string `json:"reason,omitempty"`
	Outstanding int    `json:"outstanding"`
}

func (p *pool) status(now time.Time) (list []replicaStatus, available int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.b.Replicas {
		st := r.StateAt(now)
		if st == balance.Healthy {
			available++
		}
		list = append(list, replicaStatus{Name: r.Name, URL: r.URL, Priority: r.Priority, State: st.String(), Reason: r.Reason(), Outstanding: r.Outstanding})
	}
	return list, available
}
