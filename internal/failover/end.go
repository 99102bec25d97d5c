package failover

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
)

// tick handles the passing of time: the request's own deadline, the current attempt's
// silence or closing grace, and keepalives.
func (m *Machine) tick(now time.Time) {
	if m.cfg.MaxDuration > 0 && !m.started.Add(m.cfg.MaxDuration).After(now) {
		m.parkedSet = false
		if m.attemptLive() {
			m.endAttempt(now, EndMaxRequestDuration, 0, true, false, false)
		}
		m.discardHeld()
		m.end(m.decorate(&openai.Error{Status: 504, Type: "server_error", Code: "request_timeout",
			Message: fmt.Sprintf("the request ran longer than max_request_duration (%v) and was ended", m.cfg.MaxDuration)}, false))
		return
	}
	switch m.phase {
	case closing:
		if !m.closingUntil.After(now) {
			// The engine reported an error but did not end its stream: the gateway closes
			// it, which does not prove that the engine stopped.
			m.fail(m.attempt, Uncertain, EndEngineErrorEvent, m.closingErr, now, false, false)
		}
	case waiting, receiving:
		timeout, reason := m.cfg.FirstTokenTimeout, EndFirstTokenTimeout
		if m.phase == receiving {
			timeout, reason = m.cfg.IdleTimeout, EndIdleTimeout
		}
		if timeout > 0 && !m.lastSeen.Add(timeout).After(now) {
			m.fail(m.attempt, Uncertain, reason, nil, now, false, false)
		}
	}
	if m.asking {
		// The failure waits for the retry budget; the keepalive follows its answer.
		m.asked.tick = true
		return
	}
	if !m.done {
		m.keepalive(now)
	}
}

// keepalive writes an SSE comment when the keepalive period passed with nothing delivered.
func (m *Machine) keepalive(now time.Time) {
	if !m.keepaliveAt.IsZero() && !m.keepaliveAt.After(now) && !m.committed {
		if !m.headersSent {
			m.headersSent = true
			m.emit(Action{Kind: ActSendHeaders})
		}
		m.emit(Action{Kind: ActKeepalive})
		m.keepaliveAt = now.Add(m.cfg.Keepalive)
	}
}

// endAttempt records the end of the current attempt and tells the shell to tear it down.
// neverStarted: its failure proves the engine never started the request.
func (m *Machine) endAttempt(now time.Time, reason EndReason, f FailureClass, cancel, awaitFence, neverStarted bool) {
	if n := len(m.attempts); n > 0 && m.attempts[n-1].N == m.attempt && m.attempts[n-1].Ended.IsZero() {
		m.attempts[n-1].Ended = now
		m.attempts[n-1].EndReason = reason
		m.attempts[n-1].Failure = f
		m.attempts[n-1].EngineMayHaveActed = len(m.cfg.EngineTools) > 0 && !neverStarted
	}
	m.phase = noAttempt
	m.closingErr = nil
	m.emit(Action{Kind: ActEndAttempt, Attempt: m.attempt, Reason: reason, Cancel: cancel, AwaitFence: awaitFence})
}

// failure is a failed attempt as fail received it.
type failure struct {
	attempt   int
	class     FailureClass
	reason    EndReason
	engineErr *openai.Error
	// dial: the attempt never reached its replica; neverStarted: the failure proves the
	// engine never started the request (see neverStarted).
	dial, neverStarted bool
	// tick: EvTick found it, and that tick's keepalive is still to come.
	tick bool
}

// fail handles the failure of the current attempt: fence it, then rerun or end. An
// uncertain attempt that may be rerun (it holds a worker-side lease) is cancelled first and
// its rerun waits for EvFenced, so two attempts are never alive together. neverStarted: the
// failure proves the engine never started the request (see neverStarted).
//
// When every check but the retry budget allows the rerun, the machine asks for it
// (ActTryRerun, the last action of the step) and decides on the answer (EvRerunBudget):
// the budget is the pool's, shared by many requests, and the machine takes no part of it.
func (m *Machine) fail(attempt int, class FailureClass, reason EndReason, engineErr *openai.Error, now time.Time, dial, neverStarted bool) {
	if n := len(m.attempts); dial && n > 0 && m.attempts[n-1].N == attempt {
		m.attempts[n-1].Dial = true
	}
	f := failure{attempt: attempt, class: class, reason: reason, engineErr: engineErr, dial: dial, neverStarted: neverStarted}
	d := m.shouldRerun(class, dial, neverStarted)
	if d == askBudget {
		m.asked, m.asking = f, true
		m.emit(Action{Kind: ActTryRerun, Attempt: attempt})
		return
	}
	m.decide(f, d, now)
}

// budgetAnswered decides the failure that waited for the retry budget.
func (m *Machine) budgetAnswered(granted bool, now time.Time) {
	f := m.asked
	m.asked, m.asking = failure{}, false
	d := noRerunBudget
	if granted {
		d = rerun
	}
	m.decide(f, d, now)
	if f.tick && !m.done {
		m.keepalive(now)
	}
}

// decide ends the failed attempt and reruns the request, waits for the attempt's fence, or
// ends the request, as shouldRerun decided.
func (m *Machine) decide(f failure, d decision, now time.Time) {
	await := d == rerun && f.class == Uncertain
	m.endAttempt(now, f.reason, f.class, true, await, f.neverStarted)
	m.discardHeld()
	switch {
	case await:
		m.phase = fencing
	case d == rerun:
		m.startAttempt(true)
	default:
		m.end(m.errorFor(d, f.class, f.reason, f.engineErr))
	}
}

// fenceable reports whether the current attempt can be proven stopped: it holds a
// worker-side lease.
func (m *Machine) fenceable() bool {
	n := len(m.attempts)
	return n > 0 && m.attempts[n-1].N == m.attempt && m.attempts[n-1].Fenceable
}

func (m *Machine) noReplica(attempt int, reason EndReason) {
	m.phase = noAttempt
	e := &openai.Error{
		Status:  503,
		Type:    "server_error",
		Code:    "no_healthy_replica",
		Message: fmt.Sprintf("no healthy replica of model %q is available", m.cfg.Model),
	}
	if reason == NoReplicaOverloaded {
		e.Status, e.Type, e.Code = 429, "rate_limit_error", "pool_overloaded"
		e.Message = fmt.Sprintf("every replica of model %q is at its load limit; retry later", m.cfg.Model)
	}
	switch reason {
	case NoReplicaQueueFull:
		e.Status, e.Type, e.Code = 429, "rate_limit_error", string(NoReplicaQueueFull)
		e.Message = fmt.Sprintf("every replica of model %q is at its capacity and its queue is full; retry later", m.cfg.Model)
	case NoReplicaQueueTimeout:
		e.Code = string(NoReplicaQueueTimeout)
		e.Message = fmt.Sprintf("every replica of model %q stayed at its capacity for as long as the request may wait in the queue; retry later", m.cfg.Model)
	}
	if reason == NoReplicaPinned {
		e.Code = string(NoReplicaPinned)
		e.Message = "the previous response this request continues (previous_response_id) is stored only on the replica that produced it, and that replica cannot take the request now; it is not run elsewhere, where that state does not exist"
		if attempt > 1 {
			prev := m.attempts[len(m.attempts)-1]
			e.Message = fmt.Sprintf("attempt %d on replica %s, which holds the previous response this request continues, failed before any output (%s); it is not rerun elsewhere, where that state does not exist",
				prev.N, prev.Replica, prev.EndReason)
		}
		m.discardHeld()
		m.end(m.decorate(e, false))
		return
	}
	if attempt > 1 {
		prev := m.attempts[len(m.attempts)-1]
		e.Message = fmt.Sprintf("attempt %d on replica %s failed before any output (%s) and no other compatible replica of model %q is available",
			prev.N, prev.Replica, prev.EndReason, m.cfg.Model)
		switch reason {
		case NoReplicaOverloaded:
			e.Message += " (all are at their load limit)"
		case NoReplicaQueueFull:
			e.Message += " (all are at their capacity and the queue is full)"
		case NoReplicaQueueTimeout:
			e.Message += " (all stayed at their capacity while it waited in the queue)"
		}
	}
	m.discardHeld()
	m.end(m.decorate(e, true))
}

func (m *Machine) end(e *openai.Error) {
	outcome := Failed
	if m.committed {
		outcome = Interrupted
	}
	m.outcome = outcome
	m.done = true
	m.keepaliveAt = time.Time{}
	m.emit(Action{Kind: ActFail, Err: e, AsEvent: m.headersSent, Outcome: outcome})
}

func (m *Machine) finish(o Outcome, writeDone bool) {
	m.outcome = o
	m.done = true
	m.keepaliveAt = time.Time{}
	m.emit(Action{Kind: ActFinish, Outcome: o, WriteDone: writeDone})
}
