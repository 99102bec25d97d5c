package request

import (
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// waiting is a request's wait in its pool's queue (docs/design.md §3, "The queue"): the
// attempt the machine started (its phase stays "dispatching", so its keepalives go on and
// its client leaving or a deadline ends it as before) waits for the pool to grant it a
// slot, shed it or expire it, each posted to the inbox (ctlQueue), or for its own timer
// at until. All the owner's.
type waiting struct {
	a     *Attempt // nil: not waiting
	n     int      // the machine's number of the attempt
	since time.Time
	until time.Time
	// total is the time the request spent in the queue before its current wait.
	total time.Duration
}

// queued is how long the request has waited in the queue so far.
func (rn *Run) queued(now time.Time) time.Duration {
	rn.owner.check()
	d := rn.wait.total
	if rn.wait.a != nil {
		d += now.Sub(rn.wait.since)
	}
	return d
}

// startWaiting records that attempt a waits in the pool's queue until until.
func (rn *Run) startWaiting(a *Attempt, n int, until, now time.Time) {
	rn.owner.check()
	rn.wait.a, rn.wait.n, rn.wait.since, rn.wait.until = a, n, now, until
}

// stopWaiting ends the current wait (the pool said how, or the owner stopped it) and
// returns the attempt that waited.
func (rn *Run) stopWaiting(now time.Time) *Attempt {
	rn.owner.check()
	a := rn.wait.a
	rn.wait.total += now.Sub(rn.wait.since)
	rn.wait.a = nil
	return a
}

// queueDecided handles the pool's post about the waiting attempt: it asks the pool how the
// wait ended and steps the machine on.
func (rn *Run) queueDecided(a *Attempt) {
	rn.owner.check()
	if rn.wait.a != a {
		return // a wait the owner already ended itself (a stale post)
	}
	rn.endWait(QueueWaiting)
}

// queueTimerFired ends the wait when its time is up; it reports whether it did.
func (rn *Run) queueTimerFired() bool {
	rn.owner.check()
	if rn.wait.a == nil || rn.now().Before(rn.wait.until) {
		return false
	}
	rn.endWait(QueueExpired)
	return true
}

// endWait takes the waiting attempt out of the queue — why says why, if the pool had not
// decided yet (QueueWaiting: leave it waiting then) — and goes on as the pool's answer says: dispatch it on the slot granted
// to it, or end the request with queue_full or queue_timeout.
func (rn *Run) endWait(why QueueEnd) {
	rn.owner.check()
	rn.resume(func(now time.Time) {
		a, n := rn.wait.a, rn.wait.n
		p, end := rn.pool.Unqueue(a, now, why)
		if end == QueueWaiting {
			return // not decided after all: it waits on
		}
		rn.stopWaiting(now)
		switch end {
		case QueueGranted:
			rn.dispatch(a, n, &p, now)
		case QueueShed:
			rn.srv.Metrics().Shed(rn.rec.model)
			rn.queue(failover.Event{Kind: failover.EvNoReplica, Attempt: n, Reason: failover.NoReplicaQueueFull})
		default: // expired (by the pool or by the owner's timer)
			rn.queue(failover.Event{Kind: failover.EvNoReplica, Attempt: n, Reason: failover.NoReplicaQueueTimeout})
		}
	})
}

// leaveQueue takes a waiting attempt out of the queue when its request ends (the client
// left, a deadline, shutdown); a slot granted to it meanwhile goes back to the pool.
func (rn *Run) leaveQueue() {
	rn.owner.check()
	if rn.wait.a == nil {
		return
	}
	now := rn.now()
	p, end := rn.pool.Unqueue(rn.wait.a, now, QueueLeft)
	a := rn.stopWaiting(now)
	if end == QueueGranted {
		a.replica = p.Replica
		rn.pool.Release(a, failover.AttemptInfo{}, false)
	}
}
