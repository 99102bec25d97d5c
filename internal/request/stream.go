package request

import (
	"errors"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/upstream"
)

// onUpstream handles one report of an attempt's reader. Reports of an attempt that has
// ended are dropped: once the machine fenced an attempt, nothing of it reaches the client.
func (rn *Run) onUpstream(msg upMsg) {
	rn.owner.check()
	a := msg.a
	if !rn.live(a) {
		if msg.kind == upResponse {
			closeResponse(a, msg.resp)
		}
		return
	}
	switch msg.kind {
	case upResponse:
		rn.enterInline(a, msg.resp)
	case upEnd:
		if msg.err == nil {
			rn.step(failover.Event{Kind: failover.EvEnd, Attempt: a.n})
		} else {
			rn.upstreamError(a, msg.err)
		}
	case upFailed:
		rn.upstreamError(a, msg.err)
	case upStatus:
		if msg.status == http.StatusUnauthorized || msg.status == http.StatusForbidden {
			// The engine refused the gateway's credentials: a configuration mistake, not the
			// client's. The request never reached the model, so it is rerun elsewhere at no
			// cost, and the replica stays out until its credentials work.
			rn.pool.RefusedCredentials(a.replica, msg.status)
			rn.step(failover.Event{Kind: failover.EvFailed, Attempt: a.n, Failure: failover.Dead,
				Reason: failover.EndEngineUnauthorized, Dial: true, Err: openai.NormalizeEngineError(msg.status, msg.body)})
			return
		}
		f := upstream.ClassifyStatus(msg.status)
		e := openai.NormalizeEngineError(msg.status, msg.body)
		if f.Class == failover.Overloaded {
			// An explicit "busy": keep new work off this replica for its Retry-After, and
			// tell the client the engine's own when no replica can take the request.
			wait := upstream.RetryAfter(msg.header, time.Second)
			rn.pool.Overloaded(a.replica, rn.now().Add(wait), f.Reason)
			e.RetryAfter = int((wait + time.Second - 1) / time.Second)
		}
		rn.failStatus(a, f, e, msg.status)
	case upBody:
		rn.onBody(a, msg.body)
	}
}

// onData decodes the SSE events of one read and steps the machine with each, at now, the
// time the read returned: the events of one read arrived together. Chunks the machine
// delivers as they are go in runs, each stepped as one (passing.go).
func (rn *Run) onData(a *Attempt, b []byte, now time.Time) {
	rn.owner.check()
	a.dec.Append(b)
	for rn.live(a) {
		ev, ok := a.dec.Next()
		if !ok {
			break
		}
		if rn.passes(a, ev) {
			rn.pass(a, ev)
			continue
		}
		rn.endRun(a, now)
		if rn.live(a) {
			rn.onEvent(a, ev, now)
		}
	}
	rn.endRun(a, now)
	if a.dec.Err() != nil && rn.live(a) {
		// The gateway must close a stream it cannot read, which does not prove that the
		// engine stopped.
		rn.failAttempt(a, upstream.Failure{Class: failover.Uncertain, Reason: failover.EndEventTooLarge}, nil)
	}
}

// onEvent counts one SSE event's output tokens, has the shaper prepare it for the client,
// and steps the machine with it.
func (rn *Run) onEvent(a *Attempt, ev sse.Event, now time.Time) {
	rn.owner.check()
	class := ev.Class
	tokens := ev.Outputs
	switch {
	case rn.shape.proto == sse.Completions:
		tokens = a.countTokens(ev)
	case ev.CompletionTokens >= 0:
		// The Messages and Responses APIs report the answer's output tokens at its end
		// (message_delta, response.completed): the deltas counted so far are made exact.
		tokens = max(0, ev.CompletionTokens-rn.m.Delivered())
	}
	rn.shape.note(ev)
	strip := rn.stripsUsage(a, ev)
	if strip && class&sse.Usage != 0 && class&(sse.Output|sse.Finish) == 0 && rn.m.AllFinished() {
		if !rn.p.Req.IncludeUsage {
			return // the final usage chunk the client did not ask for
		}
		strip = false
	}
	raw := rn.shape.event(ev, strip)
	e := failover.Event{Kind: failover.EvChunk, Attempt: a.n, Chunk: class, Tokens: tokens, Size: len(raw),
		Finished: ev.Finished, FinishedHigh: ev.FinishedHigh}
	if class&sse.Error != 0 {
		e.Err = openai.NormalizeEngineError(http.StatusInternalServerError, ev.Data)
	}
	rn.shape.raw = raw
	rn.stepAt(e, now)
	rn.shape.raw = nil
}

// stripsUsage reports whether ev, of attempt a, carries usage the gateway asked the engine
// for and the client did not: it is removed before the client gets the chunk.
func (rn *Run) stripsUsage(a *Attempt, ev sse.Event) bool {
	return a.usage && ev.UsageEnd > 0 && !rn.p.Req.ContinuousUsage
}

// onBody handles a complete non-streaming answer.
func (rn *Run) onBody(a *Attempt, b []byte) {
	rn.owner.check()
	raw, tokens := rn.shape.body(b)
	rn.shape.raw = raw
	rn.step(failover.Event{Kind: failover.EvBody, Attempt: a.n, Tokens: tokens})
	rn.shape.raw = nil
}

// upstreamError classifies a transport error of attempt a, which is live: an attempt the
// gateway fenced has ended, and its reader's reports are dropped before they get here. The
// client going away is never an upstream failure.
func (rn *Run) upstreamError(a *Attempt, err error) {
	rn.owner.check()
	if rn.p.R.Context().Err() != nil {
		rn.step(rn.clientGone())
		return
	}
	f := upstream.ClassifyError(err)
	if f.Unsent && !f.Dial {
		// Not one byte of the request was written: a kept-alive connection was found
		// broken as the request went out on it, or the request could not be written at
		// all. The engine cannot have seen it, so, like a failed dial, the rerun is free
		// (no prefill, no attempt counted against max_attempts); unlike a failed dial,
		// it says nothing about the replica, which is neither marked dead nor blamed
		// (Dial keeps the attempt out of its run of failures).
		if errors.Is(err, upstream.ErrInvalidRequest) {
			// The gateway built a request its client refuses (a replica URL or a header
			// the configuration let through): a bug, not the replica's fault.
			rn.srv.Log().Error("engine request not written", "request_id", rn.p.ID, "attempt", a.id, "err", err)
		}
		rn.step(failover.Event{Kind: failover.EvFailed, Attempt: a.n, Failure: failover.Dead, Reason: f.Reason, Dial: true})
		return
	}
	if errors.Is(err, errBodyTooLarge) {
		f = upstream.Failure{Class: failover.Uncertain, Reason: failover.EndBodyTooLarge}
	}
	rn.failAttempt(a, f, nil)
}

func (rn *Run) failAttempt(a *Attempt, f upstream.Failure, e *openai.Error) {
	rn.owner.check()
	rn.failStatus(a, f, e, 0)
}

// failStatus steps the failure of attempt a; status is the HTTP status the engine answered
// with instead of an answer (0: none), which the machine needs to tell whether the engine
// ever started the request (a request whose engine runs tools: docs/design.md §5).
func (rn *Run) failStatus(a *Attempt, f upstream.Failure, e *openai.Error, status int) {
	rn.owner.check()
	if f.Dial {
		rn.pool.DialFailed(a.replica, rn.now(), f.Reason)
	} else {
		rn.refineCost()
	}
	rn.step(failover.Event{Kind: failover.EvFailed, Attempt: a.n, Failure: f.Class, Reason: f.Reason, Err: e, Dial: f.Dial, Status: status})
}

// maxCounted bounds the choices whose tokens are counted from the engine's usage; a
// choice past it counts one token per chunk with output.
const maxCounted = 64

// countTokens is the output tokens a chunk adds. A chunk with one choice and usage (vLLM's
// and SGLang's continuous usage stats, asked for by the gateway or by the client; the last
// chunk of llama.cpp's stream) carries that choice's completion_tokens so far: what it adds
// is the difference to what was already counted for that choice. Any other chunk counts one
// token per choice with output. Counting per choice makes interleaved choices add up.
func (a *Attempt) countTokens(ev sse.Event) int {
	c := ev.Choice
	if c < 0 || c >= maxCounted {
		return ev.Outputs
	}
	if c >= len(a.counted) {
		a.counted = append(a.counted, make([]int, c+1-len(a.counted))...)
	}
	if ev.CompletionTokens < 0 {
		a.counted[c] += ev.Outputs
		return ev.Outputs
	}
	d := max(ev.CompletionTokens-a.counted[c], 0)
	a.counted[c] = max(a.counted[c], ev.CompletionTokens)
	return d
}
