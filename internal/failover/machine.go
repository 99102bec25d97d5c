package failover

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
)

// Budget grants reruns. *RetryBudget behind the shell's lock satisfies it; nil allows all.
type Budget interface {
	TryRerun(now time.Time) bool
}

// Config is what a Machine needs to know about its request and its pool.
type Config struct {
	RequestID string
	Model     string
	// Stream is true for a streaming response (SSE).
	Stream bool
	// MaxAttempts bounds the attempts, first try included (>= 1).
	MaxAttempts int
	// FirstTokenTimeout and IdleTimeout: silence past them makes the attempt uncertain.
	FirstTokenTimeout time.Duration
	IdleTimeout       time.Duration
	// Keepalive: period of SSE comments while nothing was delivered (streaming only; 0 = off).
	Keepalive time.Duration
	// CanFence reports whether an uncertain attempt can be proven stopped (a worker-side
	// lease). In direct mode it is false and an uncertain attempt is never rerun.
	CanFence bool
	// Budget is the pool's retry budget (nil: unlimited).
	Budget Budget
	// RerunTokenLimit refuses a rerun whose prompt is estimated above this many tokens
	// (0: no limit); PromptTokens is the estimate (SetPromptTokens may refine it).
	RerunTokenLimit int
	PromptTokens    int
}

// AttemptInfo is what the machine knows of one attempt, for the journal.
type AttemptInfo struct {
	N         int
	Replica   string
	Started   time.Time
	Ended     time.Time
	EndReason string
	Failure   FailureClass
	// Fenceable: the attempt held a worker-side lease.
	Fenceable bool
}

// attemptPhase is where the current attempt is.
type attemptPhase uint8

const (
	noAttempt   attemptPhase = iota
	dispatching              // ActStartAttempt returned, replica not yet chosen
	waiting                  // dispatched, nothing received yet
	receiving                // at least one event received
	fencing                  // an uncertain attempt was cancelled; its rerun waits for EvFenced
)

// Machine is the state of one logical request. Not safe for concurrent use.
type Machine struct {
	cfg Config

	attempt  int // current attempt number; 0 before the first
	phase    attemptPhase
	lastSeen time.Time // last event of the current attempt (or its dispatch)
	attempts []AttemptInfo
	// dialFailures counts attempts that never reached their replica; they cost no prefill
	// and do not count against MaxAttempts or the retry budget.
	dialFailures int

	// committed is the one-way latch: set when the first output-bearing write is decided.
	// Every rerun path checks it first.
	committed   bool
	headersSent bool
	held        int
	sawFinish   bool
	delivered   int
	keepaliveAt time.Time

	outcome Outcome
	err     *openai.Error
	done    bool

	out []Action
}

// New returns a machine for one logical request.
func New(cfg Config) *Machine {
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = 1
	}
	return &Machine{cfg: cfg, out: make([]Action, 0, 8)}
}

// SetPromptTokens refines the estimate of the prompt's tokens (the cost of a rerun).
func (m *Machine) SetPromptTokens(n int) { m.cfg.PromptTokens = n }

// Committed reports whether the delivery boundary was crossed.
func (m *Machine) Committed() bool { return m.committed }

// Done reports whether the request reached its terminal action.
func (m *Machine) Done() bool { return m.done }

// Outcome is the terminal outcome (Running until done).
func (m *Machine) Outcome() Outcome { return m.outcome }

// Err is the error the client received, if any.
func (m *Machine) Err() *openai.Error { return m.err }

// Delivered is the number of output tokens written to the client.
func (m *Machine) Delivered() int { return m.delivered }

// Attempts lists the attempts so far. The slice is owned by the machine.
func (m *Machine) Attempts() []AttemptInfo { return m.attempts }

// Current is the current attempt number (0 before the first).
func (m *Machine) Current() int { return m.attempt }

// Tried reports whether replica already served an attempt of this request.
func (m *Machine) Tried(replica string) bool {
	for i := range m.attempts {
		if m.attempts[i].Replica == replica {
			return true
		}
	}
	return false
}

// Deadline is when the shell must send EvTick next (zero: no deadline).
func (m *Machine) Deadline() time.Time {
	if m.done {
		return time.Time{}
	}
	var d time.Time
	if m.phase == waiting || m.phase == receiving {
		timeout := m.cfg.FirstTokenTimeout
		if m.phase == receiving {
			timeout = m.cfg.IdleTimeout
		}
		if timeout > 0 {
			d = m.lastSeen.Add(timeout)
		}
	}
	if !m.keepaliveAt.IsZero() && (d.IsZero() || m.keepaliveAt.Before(d)) {
		d = m.keepaliveAt
	}
	return d
}

// Step applies one event and returns the actions to perform, in order. The returned slice
// is reused by the next call to Step.
func (m *Machine) Step(ev Event, now time.Time) []Action {
	m.out = m.out[:0]
	if m.done {
		return m.out
	}
	switch ev.Kind {
	case EvStart:
		if m.attempt == 0 {
			if m.cfg.Stream && m.cfg.Keepalive > 0 {
				m.keepaliveAt = now.Add(m.cfg.Keepalive)
			}
			m.startAttempt(false)
		}
	case EvDispatched:
		if m.current(ev.Attempt) && m.phase == dispatching {
			m.phase = waiting
			m.lastSeen = now
			m.attempts = append(m.attempts, AttemptInfo{N: ev.Attempt, Replica: ev.Replica, Started: now, Fenceable: ev.Fenceable})
		}
	case EvNoReplica:
		if m.current(ev.Attempt) && m.phase == dispatching {
			m.noReplica(ev.Attempt, ev.Reason)
		}
	case EvChunk:
		if m.current(ev.Attempt) && m.active() {
			m.chunk(ev, now)
		}
	case EvBody:
		if m.current(ev.Attempt) && m.active() {
			m.endAttempt(now, "completed", 0)
			m.cross()
			m.delivered = ev.Tokens
			m.emit(Action{Kind: ActWrite, Attempt: ev.Attempt})
			m.finish(Completed, false)
		}
	case EvEnd:
		if m.current(ev.Attempt) && m.active() {
			if m.committed && m.sawFinish {
				// The engine finished the answer but sent no [DONE]: complete it ourselves.
				m.endAttempt(now, "completed", 0)
				m.finish(Completed, true)
				return m.out
			}
			m.fail(ev.Attempt, Dead, "closed_mid_stream", nil, now, false)
		}
	case EvFailed:
		if m.current(ev.Attempt) && m.active() {
			if ev.Dial && !m.committed {
				m.dialFailures++
			}
			m.fail(ev.Attempt, ev.Failure, ev.Reason, ev.Err, now, ev.Dial)
		}
	case EvFenced:
		if m.current(ev.Attempt) && m.phase == fencing {
			m.startAttempt(true)
		}
	case EvClientGone:
		if m.phase == waiting || m.phase == receiving {
			m.endAttempt(now, "client_gone", 0)
			m.emit(Action{Kind: ActCancelAttempt, Attempt: m.attempt, Reason: "client_gone"})
		}
		m.finish(Cancelled, false)
	case EvTick:
		m.tick(now)
	case EvAbort:
		if m.phase == waiting || m.phase == receiving {
			m.emit(Action{Kind: ActCancelAttempt, Attempt: m.attempt, Reason: ev.Reason})
			m.endAttempt(now, ev.Reason, 0)
		}
		if m.held > 0 {
			m.held = 0
			m.emit(Action{Kind: ActDiscardHeld, Attempt: m.attempt})
		}
		m.end(m.decorate(ev.Err, false))
	}
	return m.out
}

func (m *Machine) current(attempt int) bool { return attempt == m.attempt && attempt > 0 }

// active reports whether the current attempt is dispatched and not yet ended.
func (m *Machine) active() bool { return m.phase == waiting || m.phase == receiving }

// Fencing reports whether the machine waits for EvFenced before a rerun.
func (m *Machine) Fencing() bool { return m.phase == fencing && !m.done }

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

func (m *Machine) startAttempt(rerun bool) {
	m.attempt++
	m.phase = dispatching
	m.sawFinish = false
	m.emit(Action{Kind: ActStartAttempt, Attempt: m.attempt, Rerun: rerun})
}

// chunk handles one SSE event of the current attempt.
func (m *Machine) chunk(ev Event, now time.Time) {
	m.phase = receiving
	m.lastSeen = now
	c := ev.Chunk
	switch {
	case c&sseError != 0:
		m.fail(ev.Attempt, Dead, "engine_error_event", ev.Err, now, false)
		return
	case c&sseMalformed != 0:
		m.fail(ev.Attempt, Dead, "malformed_event", nil, now, false)
		return
	case c&sseDone != 0:
		m.endAttempt(now, "completed", 0)
		m.cross()
		m.emit(Action{Kind: ActWrite, Attempt: ev.Attempt})
		m.finish(Completed, false)
		return
	case c&sseComment != 0 && c&^sseComment == 0:
		// The engine's own keepalive: ours suffices, and it must not cross the boundary.
		return
	}
	if !m.committed && c&sseOutputBearing == 0 {
		m.held++
		m.emit(Action{Kind: ActHold, Attempt: ev.Attempt})
		return
	}
	m.cross()
	if c&sseFinish != 0 {
		m.sawFinish = true
	}
	m.delivered += ev.Tokens
	m.emit(Action{Kind: ActWrite, Attempt: ev.Attempt})
}

// cross latches the delivery boundary if it is not latched yet: headers, the first-delta
// record, then the held events. The caller emits the write that follows.
func (m *Machine) cross() {
	if m.committed {
		return
	}
	m.committed = true
	m.keepaliveAt = time.Time{}
	if m.cfg.Stream && !m.headersSent {
		m.headersSent = true
		m.emit(Action{Kind: ActSendHeaders})
	}
	m.emit(Action{Kind: ActMarkFirstDelta, Attempt: m.attempt})
	if m.held > 0 {
		m.held = 0
		m.emit(Action{Kind: ActWriteHeld, Attempt: m.attempt})
	}
}

func (m *Machine) tick(now time.Time) {
	if (m.phase == waiting || m.phase == receiving) && !m.Deadline().After(now) {
		timeout, reason := m.cfg.FirstTokenTimeout, "first_token_timeout"
		if m.phase == receiving {
			timeout, reason = m.cfg.IdleTimeout, "idle_timeout"
		}
		if timeout > 0 && !m.lastSeen.Add(timeout).After(now) {
			m.fail(m.attempt, Uncertain, reason, nil, now, false)
			if m.done {
				return
			}
		}
	}
	if !m.keepaliveAt.IsZero() && !m.keepaliveAt.After(now) && !m.committed {
		if !m.headersSent {
			m.headersSent = true
			m.emit(Action{Kind: ActSendHeaders})
		}
		m.emit(Action{Kind: ActKeepalive})
		m.keepaliveAt = now.Add(m.cfg.Keepalive)
	}
}

func (m *Machine) endAttempt(now time.Time, reason string, f FailureClass) {
	if n := len(m.attempts); n > 0 && m.attempts[n-1].N == m.attempt && m.attempts[n-1].Ended.IsZero() {
		m.attempts[n-1].Ended = now
		m.attempts[n-1].EndReason = reason
		m.attempts[n-1].Failure = f
	}
	m.phase = noAttempt
}

// fail handles the failure of the current attempt: fence it, then rerun or end. An
// uncertain attempt that may be rerun (it holds a worker-side lease) is cancelled first and
// its rerun waits for EvFenced, so two attempts are never alive together.
func (m *Machine) fail(attempt int, class FailureClass, reason string, engineErr *openai.Error, now time.Time, dial bool) {
	d := m.shouldRerun(class, dial, now)
	await := d == rerun && class == Uncertain
	m.emit(Action{Kind: ActCancelAttempt, Attempt: attempt, Reason: reason, AwaitFence: await})
	m.endAttempt(now, reason, class)
	if m.held > 0 {
		m.held = 0
		m.emit(Action{Kind: ActDiscardHeld, Attempt: attempt})
	}
	switch {
	case await:
		m.phase = fencing
	case d == rerun:
		m.startAttempt(true)
	default:
		m.end(m.errorFor(d, class, reason, engineErr))
	}
}

// fenceable reports whether the current attempt can be proven stopped.
func (m *Machine) fenceable() bool {
	if m.cfg.CanFence {
		return true
	}
	n := len(m.attempts)
	return n > 0 && m.attempts[n-1].N == m.attempt && m.attempts[n-1].Fenceable
}

// NoReplicaOverloaded is the EvNoReplica reason that says replicas exist but every one is
// at its load limit: the client is told to come back later (429) rather than that the pool
// is down (503).
const NoReplicaOverloaded = "overloaded"

func (m *Machine) noReplica(attempt int, reason string) {
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
	if attempt > 1 {
		prev := m.attempts[len(m.attempts)-1]
		e.Message = fmt.Sprintf("attempt %d on replica %s failed before any output (%s) and no other compatible replica of model %q is available",
			prev.N, prev.Replica, prev.EndReason, m.cfg.Model)
		if reason == NoReplicaOverloaded {
			e.Message += " (all are at their load limit)"
		}
	}
	m.end(m.decorate(e, true))
}

func (m *Machine) end(e *openai.Error) {
	outcome := Failed
	if m.committed {
		outcome = Interrupted
	}
	m.err = e
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
