package balance

import (
	"fmt"
	"time"
)

// Outlier ejection (Envoy's outlier detection, consecutive failures): a replica whose
// attempts keep failing after the connection was made — it resets every request at
// prefill, or answers 500 every time — while its health endpoint keeps passing is taken
// out of rotation for a while, so that prefix affinity stops sending it work first and
// every such request stops spending the pool's retry budget on a rerun.

// maxEjectShift caps the doubling of ejections: the longest is Cooldown << maxEjectShift.
const maxEjectShift = 3

// Ejection is what AttemptFailed did with a replica.
type Ejection struct {
	// Failures is the replica's consecutive failed attempts, this one included (0 when the
	// failure was not counted: the replica is already ejected, or ejection is off).
	Failures int
	// Ejected: this failure took the replica out of rotation for For, until Until.
	Ejected bool
	For     time.Duration
	Until   time.Time
	// Held: the replica reached EjectAfter but stays in rotation, because no other replica
	// of the pool is healthy (the failures may be the network's or the requests' rather
	// than the replicas'). Its next failure tries again.
	Held bool
	// Last is the reason of this failure; Reason, when Ejected, the ejection's reason as
	// the replica shows it ("ejected after 5 consecutive failed attempts (connection_reset)").
	Last   string
	Reason string
}

// MaxEjection is the longest an ejection lasts: Cooldown times 2^maxEjectShift. A replica
// that went this long after its last ejection ended without another starts over at the
// shortest.
func (p *Pool) MaxEjection() time.Duration { return p.Cooldown << maxEjectShift }

// AttemptCompleted records that an attempt on r completed: its run of failures ends. It
// does not end an ejection (the attempt may have started before it).
func (p *Pool) AttemptCompleted(r *Replica) {
	r.failures = 0
}

// AttemptFailed records that an attempt on r failed because of the replica (the caller
// decides which ends count: not a client's cancel, not the gateway's own, not an overload,
// not a rejection of the request, not a dial failure, which has MarkDialFailed). After
// EjectAfter consecutive failures r is ejected: Dead for Cooldown × 2^k, k being its
// earlier ejections (at most maxEjectShift, and back to 0 once r went MaxEjection after
// its last ejection without another). A passing probe does not end an ejection: the
// replica's health endpoint passing is the very case it is for. r is never ejected when
// no other replica of the pool is healthy at now; it is held instead. Failures of
// attempts that end while r is ejected (they started before) are not counted.
func (p *Pool) AttemptFailed(r *Replica, now time.Time, reason string) Ejection {
	if p.EjectAfter <= 0 || now.Before(r.ejectedUntil) {
		return Ejection{}
	}
	r.failures++
	e := Ejection{Failures: r.failures, Last: reason}
	if r.failures < p.EjectAfter {
		return e
	}
	if !p.otherHealthy(r, now) {
		e.Held = true
		return e
	}
	if !r.ejectedUntil.IsZero() && now.Sub(r.ejectedUntil) >= p.MaxEjection() {
		r.ejections = 0
	}
	e.Ejected = true
	e.Reason = fmt.Sprintf("ejected after %d consecutive failed attempts (%s)", r.failures, reason)
	e.For = p.Cooldown << min(r.ejections, maxEjectShift)
	e.Until = now.Add(e.For)
	r.ejections = min(r.ejections+1, maxEjectShift)
	r.ejectedUntil, r.ejectReason = e.Until, e.Reason
	r.failures = 0
	return e
}

// Readmit ends r's ejection and its run of failures (an operator declared it active).
// Its earlier ejections still lengthen the next one until they decay.
func (p *Pool) Readmit(r *Replica, now time.Time) {
	if now.Before(r.ejectedUntil) {
		r.ejectedUntil = now
	}
	r.failures = 0
}

// otherHealthy reports whether a replica of the pool other than r is healthy at now.
func (p *Pool) otherHealthy(r *Replica, now time.Time) bool {
	for _, o := range p.Replicas {
		if o != r && o.StateAt(now, p.Limits) == Healthy {
			return true
		}
	}
	return false
}
