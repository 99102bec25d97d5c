package balance

import "time"

// Pool is the set of replicas serving one model.
type Pool struct {
	Model    string
	Replicas []*Replica
	// Cooldown is how long a dial failure keeps a replica out of rotation.
	Cooldown time.Duration
}

// Pick chooses the replica for an attempt: among available replicas not excluded, the least
// outstanding in the lowest priority tier that has one, so a higher tier serves only when
// every lower tier is down, busy with this request's earlier attempts, or excluded. It
// returns nil when none fits.
func (p *Pool) Pick(now time.Time, exclude func(name string) bool) *Replica {
	var best *Replica
	for _, r := range p.Replicas {
		if !r.Available(now) || (exclude != nil && exclude(r.Name)) {
			continue
		}
		if best == nil || r.Priority < best.Priority ||
			(r.Priority == best.Priority && r.Outstanding < best.Outstanding) {
			best = r
		}
	}
	return best
}

// MarkDialFailed takes r out of rotation for the cooldown: the process is not listening.
func (p *Pool) MarkDialFailed(r *Replica, now time.Time, reason string) {
	r.deadUntil = now.Add(p.Cooldown)
	r.lastReason = reason
}

// MarkDead takes r out of rotation for d (an operator or orchestrator says it is gone).
func (p *Pool) MarkDead(r *Replica, now time.Time, d time.Duration, reason string) {
	r.deadUntil = now.Add(d)
	r.lastReason = reason
}

// ProbeResult records an active health probe. A success clears a dial-failure cooldown:
// the replica is back.
func (p *Pool) ProbeResult(r *Replica, ok bool, reason string) {
	r.probeFailed = !ok
	if ok {
		r.deadUntil = time.Time{}
		r.lastReason = ""
	} else {
		r.lastReason = reason
	}
}

// Find returns the replica named name, or nil.
func (p *Pool) Find(name string) *Replica {
	for _, r := range p.Replicas {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// AnyAvailable reports whether some replica may receive new work.
func (p *Pool) AnyAvailable(now time.Time) bool {
	for _, r := range p.Replicas {
		if r.Available(now) {
			return true
		}
	}
	return false
}
