package balance

import "time"

// State is what the pool believes of a replica.
type State uint8

const (
	Healthy State = iota
	// Dead: a dial failed or the replica was reported gone; no new work until DeadUntil
	// passes or a probe succeeds.
	Dead
	// Unhealthy: the last active probe failed (the replica may still be finishing streams).
	Unhealthy
)

func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Dead:
		return "dead"
	case Unhealthy:
		return "unhealthy"
	}
	return "unknown"
}

// Replica is one member of a pool.
type Replica struct {
	Name     string
	URL      string
	Priority int

	// Outstanding is the number of attempts in flight on this replica.
	Outstanding int
	deadUntil   time.Time
	probeFailed bool
	lastReason  string
}

// StateAt reports the replica's state at now.
func (r *Replica) StateAt(now time.Time) State {
	if now.Before(r.deadUntil) {
		return Dead
	}
	if r.probeFailed {
		return Unhealthy
	}
	return Healthy
}

// Available reports whether the replica may receive new work at now.
func (r *Replica) Available(now time.Time) bool { return r.StateAt(now) == Healthy }

// Reason is the last reason the replica was marked down ("" when healthy).
func (r *Replica) Reason() string { return r.lastReason }
