package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/enginemetrics"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/lease"
)

// agentLink is the gateway's connection to one replica's agent: the leases of its attempts
// there (a lease.Tracker behind a lock), their batched renewal, which doubles as the
// heartbeat, and cancels.
type agentLink struct {
	s       *Server
	pool    *pool
	replica string
	url     string
	client  *agent.Client

	mu      sync.Mutex
	tracker *lease.Tracker
	down    bool // the heartbeat failed and has not come back
}

func (s *Server) newAgentLink(p *pool, replica, url string) *agentLink {
	l := s.boot.Leases
	// The lease settings were validated with the configuration, and they cannot change
	// without a restart, so NewTracker cannot fail here.
	tr, _ := lease.NewTracker(s.epochs, lease.TrackerConfig{TTL: l.TTL.D(), DriftMargin: l.DriftMargin.D(), HeartbeatTimeout: l.HeartbeatTimeout.D()})
	return &agentLink{s: s, pool: p, replica: replica, url: url, tracker: tr,
		client: &agent.Client{BaseURL: url, Secret: s.agentSecret, HTTP: s.controlClient}}
}

// The methods below make an agentLink the request.Agent of its replica's picks.

// Grant starts the lease of an attempt about to be sent; its epoch goes in the headers.
func (l *agentLink) Grant(attempt string, now time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tracker.Grant(attempt, now)
}

// Forget drops an attempt whose lease no longer matters (it ended, or was proven stopped).
func (l *agentLink) Forget(attempt string) {
	l.mu.Lock()
	l.tracker.Remove(attempt)
	l.mu.Unlock()
}

// Fence stops renewing an attempt and returns when its lease has certainly expired.
func (l *agentLink) Fence(attempt string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tracker.Fence(attempt)
	return l.tracker.ExpiresBy(attempt)
}

// renew renews every live lease on the agent in one call (each renew_every, bounded by
// it). A failed heartbeat makes the agent's running attempts uncertain.
func (l *agentLink) renew(ctx context.Context) {
	timeout := l.s.boot.Leases.RenewEvery.D()
	l.mu.Lock()
	seq, leases := l.tracker.RenewalSent(l.s.now())
	l.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	reply, err := l.client.Renew(rctx, agent.RenewRequest{Gateway: l.s.gatewayID, TTLms: l.s.boot.Leases.TTL.D().Milliseconds(), Leases: leases})
	cancel()
	now := l.s.now()
	l.mu.Lock()
	if err == nil {
		l.tracker.RenewalAcked(seq, now, reply.Statuses())
	}
	failed := l.tracker.HeartbeatFailed(now)
	wasDown := l.down
	l.down = failed
	l.mu.Unlock()
	if err == nil {
		fp := map[string]string{}
		for k, v := range reply.Fingerprint {
			fp[k] = v
		}
		l.pool.report(l.replica, enginemetrics.Snapshot{Running: reply.Engine.Running, Waiting: reply.Engine.Waiting,
			KVUsage: reply.Engine.KVUsage, CacheConfig: fp, Known: reply.Engine.Up}, now)
	}
	if !failed {
		if wasDown {
			l.pool.probeResult(l.replica, true, "")
			l.s.log.Info("agent heartbeat is back", "replica", l.replica)
		}
		return
	}
	// Unreachable: no new work, and every running attempt there is uncertain.
	l.pool.with(l.replica, func(r *balance.Replica) {
		l.pool.b.MarkDead(r, now, l.s.boot.Leases.HeartbeatTimeout.D(), "agent heartbeat failed")
	})
	if !wasDown {
		l.s.log.Warn("agent heartbeat failed", "replica", l.replica, "err", err)
	}
	for _, a := range l.pool.attemptsOn(l.replica) {
		a.ReplicaLost(failover.Uncertain, failover.EndAgentUnreachable)
	}
}

// Cancel asks the agent to end an attempt. The reply comes only once the engine request
// has ended; it reports whether the agent acknowledged.
func (l *agentLink) Cancel(ctx context.Context, attempt string, epoch uint64) bool {
	reply, err := l.client.Cancel(ctx, attempt, epoch)
	return err == nil && reply.Acked
}

// Secret is the agents' secret, which requests to the agent carry.
func (l *agentLink) Secret() string { return l.client.Secret.Current() }
