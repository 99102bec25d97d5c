package gateway

import (
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/request"
)

// requestPool is a pool as one of its requests sees it (request.Pool). Each method takes
// the pool's lock for itself; none does I/O or calls back into the request.
type requestPool struct {
	p *pool
	s *Server
}

func (rp requestPool) Acquire(now time.Time, w request.Want, a *request.Attempt) (request.Pick, bool) {
	return rp.p.acquire(now, &w, a)
}

func (rp requestPool) Unqueue(a *request.Attempt, now time.Time, why request.QueueEnd) (request.Pick, request.QueueEnd) {
	rp.p.mu.Lock()
	defer rp.p.mu.Unlock()
	return rp.p.unqueue(a, now, why)
}

func (rp requestPool) Release(a *request.Attempt, info failover.AttemptInfo, dispatched bool) {
	rp.p.release(rp.s, a, info, dispatched)
}

func (rp requestPool) DialFailed(replica string, now time.Time, reason failover.EndReason) {
	rp.p.dialFailed(replica, now, reason)
}

func (rp requestPool) Overloaded(replica string, until time.Time, reason failover.EndReason) {
	rp.p.overloaded(replica, until, reason)
}

func (rp requestPool) RefusedCredentials(replica string, status int) {
	rp.p.refusedCredentials(rp.s, replica, status)
}

func (rp requestPool) TryRerun(now time.Time) bool  { return rp.p.tryRerun(now) }
func (rp requestPool) RetryAfter(now time.Time) int { return rp.p.retryAfter(now) }

func (rp requestPool) NotePrefix(key uint64, replica string, now time.Time) {
	rp.p.notePrefix(key, replica, now)
}

func (rp requestPool) CachedPrefix(key uint64, blocks []uint64, attempts []failover.AttemptInfo, now time.Time) int {
	return rp.p.cachedPrefix(key, blocks, attempts, now)
}

func (rp requestPool) Targets() []request.Target {
	tgs := rp.p.targets()
	out := make([]request.Target, len(tgs))
	for i, tg := range tgs {
		out[i] = request.Target{URL: tg.url, EngineKey: tg.key, AgentKey: tg.agentKey}
	}
	return out
}
