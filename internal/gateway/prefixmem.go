package gateway

import (
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// prefixMemory is the gateway's own record of which replicas recently prefilled a prompt
// prefix (by affinity key): where that prefix is likely still in the KV cache. Bounded: the
// oldest keys are forgotten first. Not safe for concurrent use; the pool's lock guards it.
type prefixMemory struct {
	seen  map[uint64]map[string]time.Time
	order []uint64 // keys in first-seen order, a ring once full
	next  int
	limit int
}

// prefixFresh is how long a prefilled prefix is assumed to stay cached.
const prefixFresh = 10 * time.Minute

func newPrefixMemory(limit int) *prefixMemory {
	return &prefixMemory{seen: make(map[uint64]map[string]time.Time), limit: limit}
}

func (m *prefixMemory) note(key uint64, replica string, now time.Time) {
	if key == 0 {
		return
	}
	reps := m.seen[key]
	if reps == nil {
		if len(m.order) < m.limit {
			m.order = append(m.order, key)
		} else {
			delete(m.seen, m.order[m.next])
			m.order[m.next] = key
			m.next = (m.next + 1) % m.limit
		}
		reps = make(map[string]time.Time, 1)
		m.seen[key] = reps
	}
	reps[replica] = now
}

// cachedOn reports whether replica prefilled the prefix recently.
func (m *prefixMemory) cachedOn(key uint64, replica string, now time.Time) bool {
	at, ok := m.seen[key][replica]
	return ok && now.Sub(at) < prefixFresh
}

// notePrefix records that replica prefilled the prompt prefix of key.
func (p *pool) notePrefix(key uint64, replica string, now time.Time) {
	if key == 0 {
		return
	}
	p.mu.Lock()
	p.prefixes.note(key, replica, now)
	p.mu.Unlock()
}

// cachedPrefix is the prompt prefix, in bytes, that a replica none of a request's attempts
// ran on likely holds in cache (0: none does).
func (p *pool) cachedPrefix(key uint64, attempts []failover.AttemptInfo, now time.Time) int {
	if key == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.b.Replicas {
		if !failover.Tried(attempts, r.Name) && !r.NoAffinity && p.prefixes.cachedOn(key, r.Name, now) {
			return p.affinityBytes
		}
	}
	return 0
}
