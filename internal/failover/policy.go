package failover

import (
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/internal/openai"
)

// decision is the answer of shouldRerun.
type decision uint8

const (
	rerun decision = iota
	noRerunCommitted
	noRerunRejected
	noRerunUnfenced
	noRerunAttempts
	noRerunBudget
	noRerunCost
	noRerunEngineActed
	// askBudget: every other check allows the rerun; the pool's retry budget decides.
	askBudget
)

// shouldRerun is the whole failover policy for a failed attempt (docs/design.md §3). It checks, in
// this order, and the first "no" wins:
//
//  1. the committed latch: after the delivery boundary, never rerun (terminate the stream);
//  2. the engine rejected the input itself: the same input fails everywhere;
//  3. the request lets the engine run tools (docs/design.md §5) and the failure does not
//     prove that the engine never started it: the engine may have acted, and a rerun would
//     act again. Fenced or not: a lease stops publication, not an action already taken;
//  4. the source attempt must be fenced: an uncertain attempt that cannot be proven stopped
//     (no worker-side lease) is never rerun, so two attempts are never alive at once;
//  5. a dial failure (the request never reached the replica) is always rerun: it costs no
//     prefill, and every replica is tried at most once, so it is bounded by the pool;
//  6. max_attempts, counting only attempts that reached a replica;
//  7. the rerun's cost: a prompt estimated above the token limit is refused up front;
//  8. the pool's retry budget (checked last, so a denied rerun spends nothing). The machine
//     does not hold it: it asks the shell (askBudget, then ActTryRerun) and the answer
//     (EvRerunBudget) decides between rerun and noRerunBudget.
func (m *Machine) shouldRerun(class FailureClass, dial, neverStarted bool) decision {
	switch {
	case m.committed:
		return noRerunCommitted
	case class == Rejected:
		return noRerunRejected
	case m.engineToolsUnsafe() && !neverStarted:
		return noRerunEngineActed
	case class == Uncertain && !m.fenceable():
		return noRerunUnfenced
	case dial:
		return rerun
	case m.attempt-m.dialFailures >= m.cfg.MaxAttempts:
		return noRerunAttempts
	case m.cfg.RerunTokenLimit > 0 && m.cfg.PromptTokens > m.cfg.RerunTokenLimit:
		return noRerunCost
	case m.cfg.RetryBudget:
		return askBudget
	}
	return rerun
}

// neverStarted reports whether a failed attempt's event proves that the engine never
// started the request, so that no tool it runs can have acted: the dial failed (the body
// never reached the engine), or, for a stream, the engine answered with an error status
// instead: vLLM and SGLang send a stream's status before they run anything, and run the
// tools while they stream. A whole answer's status proves nothing, not even a 429 or 503:
// the engine sends it once it is done with the request, whatever it did before (vLLM
// answers a generation that failed after its tools ran with a 500, SGLang with a 400), and
// nothing tells a refusal at admission from one after the tools ran.
func (m *Machine) neverStarted(ev Event) bool {
	return ev.Dial || (ev.Status != 0 && m.cfg.Stream)
}

// engineToolsUnsafe reports whether the request lets the engine run tools that the
// operator did not declare idempotent: a rerun after the engine may have acted could act
// twice.
func (m *Machine) engineToolsUnsafe() bool {
	return len(m.cfg.EngineTools) > 0 && !m.cfg.RerunEngineTools
}

// engineMayHaveActed reports whether an engine may have run a tool of this request that
// is not declared idempotent: a client that sends the request again could run it twice.
func (m *Machine) engineMayHaveActed() bool {
	if !m.engineToolsUnsafe() {
		return false
	}
	for i := range m.attempts {
		a := &m.attempts[i]
		if a.EngineMayHaveActed || (a.Ended.IsZero() && a.N == m.attempt && m.attemptLive()) {
			return true
		}
	}
	return false
}

// engineActedError is the error of a request that is not rerun because an engine may have
// run one of its tools (docs/errors.md, upstream_failed_after_tool_use).
func (m *Machine) engineActedError(replica string, reason EndReason, engineErr *openai.Error) *openai.Error {
	when := "after the request may have reached it"
	if m.committed {
		when = "after part of the answer was sent"
	}
	msg := fmt.Sprintf("replica %s failed (%s) %s; the request lets the engine run tools itself (%s), so a tool may have run, and the gateway does not run the request again",
		replica, reason, when, strings.Join(m.cfg.EngineTools, ", "))
	if engineErr != nil && engineErr.Message != "" {
		msg += "; the engine said: " + engineErr.Message
	}
	return &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_failed_after_tool_use", Message: msg}
}

// errorFor builds the error the client gets when a failed attempt is not rerun.
func (m *Machine) errorFor(d decision, class FailureClass, reason EndReason, engineErr *openai.Error) *openai.Error {
	last := m.attempts[len(m.attempts)-1]
	switch d {
	case noRerunCommitted:
		if m.engineToolsUnsafe() {
			return m.decorate(m.engineActedError(last.Replica, reason, engineErr), false)
		}
		msg := "generation interrupted after part of the answer was sent"
		return m.decorate(&openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_decode_interrupted", Message: msg}, false)
	case noRerunEngineActed:
		return m.decorate(m.engineActedError(last.Replica, reason, engineErr), false)
	case noRerunRejected:
		if engineErr != nil {
			return m.decorate(engineErr, false)
		}
		return m.decorate(&openai.Error{Status: 400, Type: "invalid_request_error", Code: "rejected_by_engine",
			Message: fmt.Sprintf("replica %s rejected the request", last.Replica)}, false)
	case noRerunUnfenced:
		return m.decorate(m.unfencedError(last.Replica, reason, engineErr), true)
	case noRerunCost:
		return m.decorate(&openai.Error{Status: 503, Type: "server_error", Code: "rerun_too_expensive",
			Message: fmt.Sprintf("replica %s failed before any output (%s); rerunning would prefill about %d prompt tokens, over the limit of %d",
				last.Replica, reason, m.cfg.PromptTokens, m.cfg.RerunTokenLimit)}, true)
	case noRerunBudget:
		return m.decorate(&openai.Error{Status: 503, Type: "server_error", Code: "retry_budget_exhausted",
			Message: fmt.Sprintf("replica %s failed before any output (%s) and the pool's retry budget is exhausted", last.Replica, reason)}, true)
	}
	// Out of attempts: report the last failure.
	if engineErr != nil {
		e := *engineErr
		if e.Message == "" {
			e.Message = fmt.Sprintf("replica %s failed (%s)", last.Replica, reason)
		}
		return m.decorate(&e, true)
	}
	status, code := 502, "upstream_unavailable"
	if class == Overloaded {
		status, code = 503, "engine_overloaded"
	}
	return m.decorate(&openai.Error{Status: status, Type: "upstream_error", Code: code,
		Message: fmt.Sprintf("replica %s failed before any output (%s) after %d attempt(s)", last.Replica, reason, m.attempt-m.dialFailures)}, true)
}

// decorate adds the fencegate fields: request id, partial output, delivered tokens and
// whether a client retry of the same input is safe: never once output was delivered or an
// engine may have run one of the request's tools.
func (m *Machine) decorate(e *openai.Error, retryable bool) *openai.Error {
	partial := m.committed
	delivered := m.delivered
	retry := retryable && !m.committed && !m.engineMayHaveActed()
	e.RequestID = m.cfg.RequestID
	e.PartialOutput = &partial
	e.DeliveredOutputTokens = &delivered
	e.Retryable = &retry
	if e.Status == 0 {
		e.Status = 502
	}
	return e
}

// unfencedError is the error of an uncertain attempt that cannot be proven stopped (no
// agent), so it is not rerun: the engine may still be decoding it.
func (m *Machine) unfencedError(replica string, reason EndReason, engineErr *openai.Error) *openai.Error {
	const why = "it is reached without an agent, so the gateway cannot prove the engine stopped and does not rerun the request"
	switch reason {
	case EndEngineErrorEvent:
		if engineErr != nil {
			e := *engineErr
			return &e
		}
		return &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_protocol_error",
			Message: fmt.Sprintf("replica %s reported an error and did not end its stream; %s", replica, why)}
	case EndMalformedEvent, EndEventTooLarge, EndHeldTooLarge:
		return &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_protocol_error",
			Message: fmt.Sprintf("replica %s sent a stream the gateway cannot forward (%s) before any output; the gateway closed the connection, but %s", replica, reason, why)}
	}
	return &openai.Error{Status: 504, Type: "upstream_error", Code: "upstream_unresponsive",
		Message: fmt.Sprintf("replica %s stopped responding (%s) before any output; %s", replica, reason, why)}
}
