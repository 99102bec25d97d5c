package failover

import (
	"time"

	"github.com/fencegate/fencegate/internal/openai"
)

// Config is what a Machine needs to know about its request and its pool.
type Config struct {
	RequestID string
	Model     string
	// Stream is true for a streaming response (SSE).
	Stream bool
	// Choices is the number of choices the answer has (n, times the prompts of a
	// completions prompt array); a stream is complete only when every one has finished.
	// Default 1.
	Choices int
	// MaxAttempts bounds the attempts, first try included (>= 1).
	MaxAttempts int
	// FirstTokenTimeout and IdleTimeout: silence past them makes the attempt uncertain.
	FirstTokenTimeout time.Duration
	IdleTimeout       time.Duration
	// MaxDuration bounds the whole request (0: no bound). Past it the request ends with
	// request_timeout, whatever it was doing.
	MaxDuration time.Duration
	// Keepalive: period of SSE comments while nothing was delivered (streaming only; 0 = off).
	Keepalive time.Duration
	// MaxHeldBytes bounds the non-output events held before the boundary (0: no bound).
	// An attempt that sends more is failed: an engine does not send that much preamble.
	MaxHeldBytes int
	// EndGrace is how long an attempt that sent an engine error event has to end its
	// stream; its ending proves the engine stopped. Past it the gateway closes the stream
	// itself, which proves nothing (the attempt is uncertain). Default 5s.
	EndGrace time.Duration
	// DurableBoundary: the boundary must be recorded durably before it is crossed
	// (ActRecordBoundary), because another gateway may take the request over.
	DurableBoundary bool
	// RetryBudget: the pool bounds reruns with a retry budget. The machine holds no part of
	// it: when every other check allows a rerun it asks the shell (ActTryRerun), which asks
	// the pool's budget and answers (EvRerunBudget). Without it every such rerun is allowed.
	RetryBudget bool
	// RerunTokenLimit refuses a rerun whose prompt is estimated above this many tokens
	// (0: no limit); PromptTokens is the estimate (SetPromptTokens may refine it).
	RerunTokenLimit int
	PromptTokens    int
	// EngineTools names the tools of the request that the engine runs itself (its mcp,
	// code_interpreter, web_search_preview, ... tools: docs/design.md §5). Such a request
	// may have acted once its body may have reached an engine: a failed attempt is rerun
	// only when its failure proves the engine never started it (see neverStarted), and the
	// client's error says that a tool may have run. Empty for a request without them.
	EngineTools []string
	// RerunEngineTools: the operator declared every engine-run tool of the request
	// idempotent (policy.idempotent_mcp_servers), so it is rerun and reported as any other
	// request; its attempts still record that the engine may have acted.
	RerunEngineTools bool
}

// DefaultEndGrace is Config.EndGrace's default.
const DefaultEndGrace = 5 * time.Second

// AttemptInfo is what the machine knows of one attempt, for the journal.
type AttemptInfo struct {
	N         int
	Replica   string
	Started   time.Time
	Ended     time.Time
	EndReason EndReason
	Failure   FailureClass
	// Fenceable: the attempt held a worker-side lease.
	Fenceable bool
	// Dial: the attempt never reached its replica (nothing ran there).
	Dial bool
	// EngineMayHaveActed: the request lets the engine run tools and this attempt's body may
	// have reached an engine, which may have run one (set when the attempt ends).
	EngineMayHaveActed bool
}

// attemptPhase is where the current attempt is.
type attemptPhase uint8

const (
	noAttempt   attemptPhase = iota
	dispatching              // ActStartAttempt returned, replica not yet chosen
	waiting                  // dispatched, nothing received yet
	receiving                // at least one event received
	closing                  // the engine sent an error event; waiting for it to end the stream
	fencing                  // an uncertain attempt was cancelled; its rerun waits for EvFenced
)

// Machine is the state of one logical request. Not safe for concurrent use.
type Machine struct {
	cfg Config

	started  time.Time
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
	heldBytes   int
	// finished are the choices of the current attempt that sent a finish_reason:
	// indices below 64 as bits, the others counted.
	finished     uint64
	finishedHigh int
	delivered    int
	keepaliveAt  time.Time

	// A durable boundary is recorded once; until the answer, the event that would cross
	// it is parked.
	boundaryRecorded bool
	parked           Event
	parkedSet        bool

	// closing: the engine's error event, and until when it may end its stream.
	closingErr   *openai.Error
	closingUntil time.Time

	// asking: a failed attempt waits for the retry budget's answer (ActTryRerun); asked
	// is that failure.
	asked  failure
	asking bool

	outcome Outcome
	done    bool

	// out is the current step's actions, in outBuf unless a step emits more: a step emits
	// one to four, and the machine is then one allocation, not two (every open stream
	// holds one).
	out    []Action
	outBuf [4]Action
}

// New returns a machine for one logical request.
func New(cfg Config) *Machine {
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = 1
	}
	if cfg.Choices < 1 {
		cfg.Choices = 1
	}
	if cfg.EndGrace <= 0 {
		cfg.EndGrace = DefaultEndGrace
	}
	m := &Machine{cfg: cfg}
	m.out = m.outBuf[:0]
	return m
}

// SetPromptTokens refines the estimate of the prompt's tokens (the cost of a rerun).
func (m *Machine) SetPromptTokens(n int) { m.cfg.PromptTokens = n }

// Committed reports whether the delivery boundary was crossed.
func (m *Machine) Committed() bool { return m.committed }

// Done reports whether the request reached its terminal action.
func (m *Machine) Done() bool { return m.done }

// Outcome is the terminal outcome (Running until done).
func (m *Machine) Outcome() Outcome { return m.outcome }

// Delivered is the number of output tokens written to the client.
func (m *Machine) Delivered() int { return m.delivered }

// Attempts lists the attempts so far. The slice is owned by the machine.
func (m *Machine) Attempts() []AttemptInfo { return m.attempts }

// Attempt returns what the machine knows of attempt n.
func (m *Machine) Attempt(n int) (AttemptInfo, bool) {
	for i := range m.attempts {
		if m.attempts[i].N == n {
			return m.attempts[i], true
		}
	}
	return AttemptInfo{}, false
}

// Current is the current attempt number (0 before the first).
func (m *Machine) Current() int { return m.attempt }

// Tried reports whether replica already served an attempt of this request.
func (m *Machine) Tried(replica string) bool { return Tried(m.attempts, replica) }

// Tried reports whether one of attempts (a machine's Attempts) ran on replica: a rerun goes
// elsewhere.
func Tried(attempts []AttemptInfo, replica string) bool {
	for i := range attempts {
		if attempts[i].Replica == replica {
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
	earliest := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	switch m.phase {
	case waiting:
		if m.cfg.FirstTokenTimeout > 0 {
			earliest(m.lastSeen.Add(m.cfg.FirstTokenTimeout))
		}
	case receiving:
		if m.cfg.IdleTimeout > 0 {
			earliest(m.lastSeen.Add(m.cfg.IdleTimeout))
		}
	case closing:
		earliest(m.closingUntil)
	}
	if m.cfg.MaxDuration > 0 && !m.started.IsZero() {
		earliest(m.started.Add(m.cfg.MaxDuration))
	}
	earliest(m.keepaliveAt)
	return d
}

// Step applies one event and returns the actions to perform, in order. The returned slice
// is reused by the next call to Step.
func (m *Machine) Step(ev Event, now time.Time) []Action {
	m.out = m.out[:0]
	if m.done {
		return m.out
	}
	if m.asking && ev.Kind != EvRerunBudget && ev.Kind != EvClientGone && ev.Kind != EvAbort {
		return m.out // the shell answers ActTryRerun before anything else
	}
	switch ev.Kind {
	case EvStart:
		if m.attempt == 0 {
			m.started = now
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
		if m.current(ev.Attempt) && !m.parkedSet {
			switch m.phase {
			case waiting, receiving:
				m.chunk(ev, now)
			case closing:
				m.closingChunk(ev, now)
			}
		}
	case EvBody:
		if m.current(ev.Attempt) && m.active() && !m.parkedSet {
			m.body(ev, now)
		}
	case EvEnd:
		if m.current(ev.Attempt) && m.phase != fencing && m.attemptLive() && !m.parkedSet {
			m.streamEnded(ev.Attempt, now)
		}
	case EvFailed:
		if m.current(ev.Attempt) && m.attemptLive() && !m.parkedSet {
			if m.phase == closing && ev.Failure == Dead {
				// The engine reported an error and then its connection ended: proof.
				m.fail(ev.Attempt, Dead, EndEngineErrorEvent, m.closingErr, now, false, false)
				return m.out
			}
			if ev.Dial && !m.committed {
				m.dialFailures++
			}
			m.fail(ev.Attempt, ev.Failure, ev.Reason, ev.Err, now, ev.Dial, m.neverStarted(ev))
		}
	case EvFenced:
		if m.current(ev.Attempt) && m.phase == fencing {
			m.startAttempt(true)
		}
	case EvBoundaryRecorded:
		if m.parkedSet {
			m.boundaryAnswered(ev, now)
		}
	case EvRerunBudget:
		if m.asking && ev.Attempt == m.asked.attempt {
			m.budgetAnswered(ev.Granted, now)
		}
	case EvClientGone:
		outcome, reason := Cancelled, EndClientGone
		if ev.Stalled {
			outcome, reason = ClientStalled, EndClientStalled
		}
		m.parkedSet, m.asking = false, false
		if m.attemptLive() {
			m.endAttempt(now, reason, 0, true, false, false)
		}
		m.finish(outcome, false)
	case EvTick:
		m.tick(now)
	case EvAbort:
		m.parkedSet, m.asking = false, false
		if m.attemptLive() {
			m.endAttempt(now, ev.Reason, 0, true, false, false)
		}
		m.discardHeld()
		m.end(m.decorate(ev.Err, false))
	}
	return m.out
}

func (m *Machine) current(attempt int) bool { return attempt == m.attempt && attempt > 0 }

// active reports whether the current attempt is dispatched and answering normally.
func (m *Machine) active() bool { return m.phase == waiting || m.phase == receiving }

// attemptLive reports whether the current attempt is dispatched and not yet ended.
func (m *Machine) attemptLive() bool { return m.active() || m.phase == closing }

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

func (m *Machine) startAttempt(rerun bool) {
	m.attempt++
	m.phase = dispatching
	m.finished, m.finishedHigh = 0, 0
	m.closingErr = nil
	m.emit(Action{Kind: ActStartAttempt, Attempt: m.attempt, Rerun: rerun})
}
