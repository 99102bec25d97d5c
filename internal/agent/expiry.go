package agent

import "time"

// untilExpiryLocked returns how long until at's lease expires on the agent's
// clock (at least 0); the caller holds a.mu.
func (a *Agent) untilExpiryLocked(at *attempt) time.Duration {
	exp, ok := a.table.ExpiresAt(at.id)
	if !ok {
		return 0
	}
	return max(0, exp.Sub(a.cfg.Now()))
}

// checkExpiry runs when at's expiry timer fires. The per-event check stops an
// engine that keeps sending; this timer stops one that has gone silent (hung,
// or stuck in a queue), which would otherwise decode on until it next wrote.
// A lease renewed meanwhile just moves the timer to its new expiry.
func (a *Agent) checkExpiry(at *attempt) {
	a.mu.Lock()
	if at.finished {
		a.mu.Unlock()
		return
	}
	if a.table.ValidRef(at.lease, at.epoch, a.cfg.Now()) {
		at.timer.Reset(a.untilExpiryLocked(at))
		a.mu.Unlock()
		return
	}
	cause := a.invalidCauseLocked(at)
	a.mu.Unlock()
	a.abort(at, cause)
}

// invalidCauseLocked says why at's lease is no longer valid: revoked (by a
// cancel), superseded (by a newer epoch) or expired.
func (a *Agent) invalidCauseLocked(at *attempt) error {
	e, ok := a.table.Lookup(at.id)
	switch {
	case !ok:
		return errLeaseExpired // swept: only a long-expired lease is forgotten
	case e.Revoked && e.Epoch == at.epoch:
		return errRevoked
	case e.Epoch != at.epoch, e.Superseded:
		return errSuperseded
	}
	return errLeaseExpired
}
