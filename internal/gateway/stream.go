package gateway

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/upstream"
	"github.com/tidwall/gjson"
)

// onUpstream handles one report of an attempt's reader. Reports of an attempt that has
// ended are dropped: once the machine fenced an attempt, nothing of it reaches the client.
func (rn *run) onUpstream(msg upMsg) {
	a := msg.a
	if msg.kind == upData {
		rn.handBack = append(rn.handBack, a)
	}
	if !rn.live(a) {
		return
	}
	switch msg.kind {
	case upData:
		rn.onData(a, (*msg.buf)[:msg.n])
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
			rn.pool.refusedCredentials(rn.s, a.replica, msg.status)
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
			rn.pool.overloaded(a.replica, rn.now().Add(wait), f.Reason)
			e.RetryAfter = int((wait + time.Second - 1) / time.Second)
		}
		rn.failStatus(a, f, e, msg.status)
	case upBody:
		rn.onBody(a, msg.body)
	}
}

// onData decodes the SSE events of one read and steps the machine with each.
func (rn *run) onData(a *attempt, b []byte) {
	a.dec.Append(b)
	for rn.live(a) {
		ev, ok := a.dec.Next()
		if !ok {
			break
		}
		rn.onEvent(a, ev)
	}
	if a.dec.Err() != nil && rn.live(a) {
		// The gateway must close a stream it cannot read, which does not prove that the
		// engine stopped.
		rn.failAttempt(a, upstream.Failure{Class: failover.Uncertain, Reason: failover.EndEventTooLarge}, nil)
	}
}

// onEvent prepares one SSE event for the client (rewriting it only where it must) and
// steps the machine with it.
func (rn *run) onEvent(a *attempt, ev sse.Event) {
	class := ev.Class
	tokens := ev.Outputs
	switch {
	case rn.proto == sse.Completions:
		tokens = a.countTokens(ev)
	case ev.CompletionTokens >= 0:
		// The Messages and Responses APIs report the answer's output tokens at its end
		// (message_delta, response.completed): the deltas counted so far are made exact.
		tokens = max(0, ev.CompletionTokens-rn.m.Delivered())
	}
	rn.curSeq = ev.Sequence
	// The current attempt's first lifecycle event names its response; a failed attempt's
	// is forgotten with its held events (ActDiscardHeld).
	if rn.proto == sse.Responses && rn.st.ResponseID == "" && class == 0 {
		rn.noteResponse(ev.Data)
	}
	data, rewrite := ev.Data, false
	if a.usage && ev.UsageEnd > 0 && !rn.req.ContinuousUsage {
		// The usage in this chunk was asked for by the gateway, not by the client. This is
		// on the token path: the member is cut out by its offsets, into a reused buffer.
		if class&sse.Usage != 0 && class&(sse.Output|sse.Finish) == 0 && rn.m.AllFinished() {
			if !rn.req.IncludeUsage {
				return // the final usage chunk the client did not ask for
			}
		} else {
			rn.stripped = append(append(rn.stripped[:0], data[:ev.UsageStart]...), data[ev.UsageEnd:]...)
			data, rewrite = rn.stripped, true
		}
	}
	if class&sse.NullError != 0 {
		// Never forward "error": null in an ordinary chunk (docs/design.md §2): the
		// official SDKs take any "error" key for an error. Rare: it may allocate.
		data, rewrite = sse.StripNullError(nil, data), true
	}
	if class&sse.ToolCalls != 0 {
		if d, ok := rewriteToolIDs(rn.proto, data, true, rn.id); ok {
			data, rewrite = d, true
		}
	}
	if rewrite {
		// Rare or cheap, so the event is rebuilt as one data line (after its name).
		rn.rewritten = rn.rewritten[:0]
		if ev.Name != nil {
			rn.rewritten = append(append(append(rn.rewritten, "event: "...), ev.Name...), '\n')
		}
		rn.rewritten = sse.AppendData(rn.rewritten, data)
		ev.Raw = rn.rewritten
	}
	e := failover.Event{Kind: failover.EvChunk, Attempt: a.n, Chunk: class, Tokens: tokens, Size: len(ev.Raw),
		Finished: ev.Finished, FinishedHigh: ev.FinishedHigh}
	if class&sse.Error != 0 {
		e.Err = openai.NormalizeEngineError(http.StatusInternalServerError, ev.Data)
	}
	rn.raw = ev.Raw
	rn.step(e)
	rn.raw = nil
}

// noteResponse keeps what the Responses API's final events need from a lifecycle event
// (response.created): the response's id, model and creation time.
func (rn *run) noteResponse(data []byte) {
	r := gjson.GetBytes(data, "response")
	if id := r.Get("id"); id.Type == gjson.String {
		rn.st.ResponseID, rn.st.Model, rn.st.CreatedAt = id.String(), r.Get("model").String(), r.Get("created_at").Int()
	}
}

// onBody handles a complete non-streaming answer.
func (rn *run) onBody(a *attempt, b []byte) {
	var tokens int
	rewrite := false
	switch rn.proto {
	case sse.Messages:
		tokens = int(gjson.GetBytes(b, "usage.output_tokens").Int())
		rewrite = bytes.Contains(b, []byte(`"tool_use"`))
	case sse.Responses:
		tokens = int(gjson.GetBytes(b, "usage.output_tokens").Int())
		rewrite = bytes.Contains(b, []byte(`"function_call"`))
	default:
		tokens = int(gjson.GetBytes(b, "usage.completion_tokens").Int())
		rewrite = rn.req.Endpoint != openai.Embeddings && sse.Classify(b)&sse.ToolCalls != 0
	}
	if rewrite {
		b, _ = rewriteToolIDs(rn.proto, b, false, rn.id)
	}
	if rn.proto == sse.Responses {
		rn.st.ResponseID = gjson.GetBytes(b, "id").String()
	}
	rn.raw = b
	rn.step(failover.Event{Kind: failover.EvBody, Attempt: a.n, Tokens: tokens})
	rn.raw = nil
}

// upstreamError classifies a transport error of attempt a, which is live: an attempt the
// gateway fenced has ended, and its reader's reports are dropped before they get here. The
// client going away is never an upstream failure.
func (rn *run) upstreamError(a *attempt, err error) {
	if rn.r.Context().Err() != nil {
		rn.step(rn.clientGone())
		return
	}
	f := upstream.ClassifyError(err)
	if errors.Is(err, errBodyTooLarge) {
		f = upstream.Failure{Class: failover.Uncertain, Reason: failover.EndBodyTooLarge}
	}
	rn.failAttempt(a, f, nil)
}

func (rn *run) failAttempt(a *attempt, f upstream.Failure, e *openai.Error) {
	rn.failStatus(a, f, e, 0)
}

// failStatus steps the failure of attempt a; status is the HTTP status the engine answered
// with instead of an answer (0: none), which the machine needs to tell whether the engine
// ever started the request (a request whose engine runs tools: docs/design.md §5).
func (rn *run) failStatus(a *attempt, f upstream.Failure, e *openai.Error, status int) {
	if f.Dial {
		rn.pool.dialFailed(a.replica, rn.now(), f.Reason)
	} else {
		rn.refineCost()
	}
	rn.step(failover.Event{Kind: failover.EvFailed, Attempt: a.n, Failure: f.Class, Reason: f.Reason, Err: e, Dial: f.Dial, Status: status})
}

// countTokens is the output tokens a chunk adds. A chunk with one choice and usage (vLLM's
// and SGLang's continuous usage stats, asked for by the gateway or by the client; the last
// chunk of llama.cpp's stream) carries that choice's completion_tokens so far: what it adds
// is the difference to what was already counted for that choice. Any other chunk counts one
// token per choice with output. Counting per choice makes interleaved choices add up.
func (a *attempt) countTokens(ev sse.Event) int {
	c := ev.Choice
	if c < 0 || c >= len(a.counted) {
		return ev.Outputs
	}
	if ev.CompletionTokens < 0 {
		a.counted[c] += ev.Outputs
		return ev.Outputs
	}
	d := max(ev.CompletionTokens-a.counted[c], 0)
	a.counted[c] = max(a.counted[c], ev.CompletionTokens)
	return d
}
