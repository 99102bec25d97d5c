package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/fencegate/fencegate/internal/sim"
)

// chunk is what the checker reads of an SSE event or an error body.
type chunk struct {
	Choices []struct {
		Index int     `json:"index"`
		Text  *string `json:"text"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       *string `json:"id"`
				Index    int     `json:"index"`
				Function struct {
					Name      *string `json:"name"`
					Arguments string  `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

type apiError struct {
	Type                  string `json:"type"`
	Code                  string `json:"code"`
	Message               string `json:"message"`
	RequestID             string `json:"request_id"`
	PartialOutput         *bool  `json:"partial_output"`
	DeliveredOutputTokens *int   `json:"delivered_output_tokens"`
	Retryable             *bool  `json:"retryable"`
}

// stream is what a client received in an SSE response, choice by choice.
type stream struct {
	text     []string // text (content, or a completion's text) per choice
	tokens   []int    // tokens per choice, counted as the engine counts them
	finish   []string // finish_reason per choice ("": none yet)
	toolName []string
	toolArgs []string
	// usageFinal is the completion_tokens of the usage-only chunk; usageInChunks says
	// whether a chunk with choices carried usage.
	usageFinal    *int
	usageInChunks bool
	errEvent      *apiError
	done          bool
	// deltas counts the Messages and Responses delta events that carried output: the
	// tokens the gateway counts for an engine that reports usage only at the end of its
	// answer (docs/errors.md), fewer than the words when an event carries several.
	deltas int
	// responseID is the Responses answer's id, as its response.created named it.
	responseID string
	// engineCall says an item announcing an engine-run tool's call reached the client;
	// engineArgs is the call's text its deltas carried (the engine counts it in output
	// tokens).
	engineCall bool
	engineArgs string
}

// output reports whether anything output-bearing reached the client.
func (st *stream) output() bool {
	if st.engineCall {
		return true
	}
	for i := range st.text {
		if st.text[i] != "" || st.toolArgs[i] != "" || st.toolName[i] != "" || st.finish[i] != "" {
			return true
		}
	}
	return false
}

func (st *stream) delivered() int {
	n := 0
	for _, t := range st.tokens {
		n += t
	}
	return n
}

// words counts the sim's text tokens: each is a word of its vocabulary with its leading
// space, so a text has as many tokens as words, however they were grouped into chunks.
func words(s string) int { return len(strings.Fields(s)) }

// argumentTokens counts the tokens of a tool call's arguments as the sim cuts them (its
// argumentPieces): a run of letters and digits, or a run of other characters, each with
// the spaces before it. Chunks carry whole tokens, so a delivered prefix counts the same.
func argumentTokens(s string) int {
	kind := func(r rune) int {
		switch {
		case unicode.IsSpace(r):
			return 0
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			return 1
		}
		return 2
	}
	n, runes, curKind := 0, 0, 0
	for _, r := range s {
		k := kind(r)
		if (k == 0 && curKind != 0) || (k != 0 && curKind != 0 && k != curKind) {
			n, runes, curKind = n+1, 0, 0
		}
		runes++
		if k != 0 {
			curKind = k
		}
	}
	if runes > 0 {
		n++
	}
	return n
}

// Rules a history can break; each violation names one, so that a report can say which
// rules a kind of fault breaks.
const (
	rTransport      = "transport"       // the response broke off at the transport, or has no request id
	rRefused        = "refused"         // a valid request was refused
	rJournal        = "journal"         // the journal tells another story than the client saw
	rReference      = "reference"       // the checker could not learn a replica's answer
	rShape          = "shape"           // an event or error body no stream may contain
	rSplice         = "splice"          // output that is not one replica's answer (or a prefix of it)
	rCutDone        = "cut-done"        // [DONE] although a choice never finished
	rTruncation     = "truncation"      // a stream that ends with neither [DONE] nor an error event
	rTokens         = "tokens"          // delivered token counts that are not the tokens the client received
	rUsage          = "usage"           // usage the client did not ask for
	rUncertainRerun = "uncertain-rerun" // direct mode ran a request again without proof the last attempt stopped
	rOverlap        = "overlap"         // two attempts of a request ran at once
	rZombie         = "zombie"          // an engine request still runs after its request ended
	rUnknownAttempt = "unknown-attempt" // an engine request the journal does not know, or one run twice
	rStall          = "stall"           // a stalled client's request did not end client_stalled, cancelled upstream
	rLeave          = "leave"           // a client that left did not end its request, or another attempt followed
	rReplay         = "replay"          // a keyed retry did not get the same answer, interruption or error
	rDurable        = "durable"         // a keyed retry after the end found the request still running
	rRerunOnRetry   = "rerun-on-retry"  // a keyed retry ran the request again
	rToolID         = "tool-id"         // a tool call id not derived from the request id
	rClass          = "class"           // a failure classified against the evidence (a silent engine called dead)
	rPinned         = "pinned"          // a continuation of a stored response ran elsewhere than its replica, or was refused without cause
	rToolTwice      = "tool-twice"      // an engine-run tool executed twice for one logical request
	rRun            = "run"             // the run itself did not end cleanly
)

// violation is one broken rule of one history.
type violation struct{ rule, text string }

func (v violation) String() string { return v.rule + ": " + v.text }

type failFunc func(rule, format string, args ...any)

// judge checks one history against the contract. It returns what the client saw
// (completed, rerun-completed, interrupted, failed, left, stalled; "" when it could not
// tell) and every violation.
func judge(h *history) (string, []violation) {
	var bad []violation
	fail := func(rule, format string, args ...any) {
		bad = append(bad, violation{rule, fmt.Sprintf(format, args...)})
	}
	s := &h.req.seen
	if s.err != nil {
		fail(rTransport, "transport error: %v (the gateway must end every response itself)", s.err)
	}
	if s.status == 0 {
		return "", bad
	}
	if !strings.HasPrefix(s.requestID, "req_") {
		fail(rTransport, "no X-Request-Id")
		return "", bad
	}
	if s.replayed {
		fail(rReplay, "the first request with its Idempotency-Key was answered as a replay")
	}
	// A continuation's replica may answer that it no longer has the response (after a
	// restart): judgeContinuation says when that is sound.
	continuationGone := h.req.prevID != "" && s.status == http.StatusNotFound
	if s.status >= 400 && s.status < 500 && s.status != http.StatusTooManyRequests && !continuationGone {
		fail(rRefused, "a valid request was refused: %d %s", s.status, strings.TrimSpace(s.body()))
		return "failed", bad
	}
	if h.journalErr != nil {
		fail(rJournal, "journal: %v", h.journalErr)
		return "", bad
	}
	var outcome string
	var st *stream
	switch {
	case s.status != http.StatusOK:
		outcome = judgeError(h, fail)
	case !h.req.stream:
		outcome = judgeWhole(h, fail)
	default:
		outcome, st = judgeStream(h, fail)
	}
	judgeAttempts(h, fail)
	judgeEngineTool(h, st, fail)
	judgeClient(h, st, fail)
	judgeRetries(h, fail)
	judgeContinuation(h, fail)
	return outcome, bad
}

// judgeError checks an HTTP error answer: before any output, in the API's own shape, and
// journaled as failed.
func judgeError(h *history, fail failFunc) string {
	s, j := &h.req.seen, h.journal
	e, problem := errorBodyProblem(h.req, s.status, s.raw)
	if problem != "" {
		fail(rShape, "status %d with an error body in the wrong shape (%s): %q", s.status, problem, s.body())
	}
	if e == nil {
		return "failed"
	}
	if j.Outcome != "failed" || j.FirstDeltaSent || j.DeliveredOutputTokens != 0 {
		fail(rJournal, "client got %d before any output, journal says %s (first_delta_sent %v, %d tokens)", s.status, j.Outcome, j.FirstDeltaSent, j.DeliveredOutputTokens)
	}
	judgeUnfencedError(h, e.Code, fail)
	if e.RequestID != "" && e.RequestID != s.requestID {
		fail(rShape, "error names request %s, the response %s", e.RequestID, s.requestID)
	}
	return "failed"
}

// judgeUnfencedError: in direct mode, a request whose last attempt failed uncertain before
// any output is not rerun, and its client is told so: upstream_unresponsive (silence) or
// upstream_protocol_error (a stream the gateway closed itself), or the engine's own error.
func judgeUnfencedError(h *history, code string, fail failFunc) {
	n := len(h.journal.Attempts)
	if h.fenced || n == 0 || h.journal.Attempts[n-1].Failure != "uncertain" || h.req.engineTool {
		return // a request whose engine runs tools is judged by judgeEngineTool
	}
	last := h.journal.Attempts[n-1]
	want := "upstream_unresponsive"
	switch last.EndReason {
	case "malformed_event", "event_too_large", "held_events_too_large":
		want = "upstream_protocol_error"
	case "engine_error_event":
		return // the engine's own error goes to the client
	}
	if code != want {
		fail(rClass, "attempt %s ended uncertain (%s) before output and was not rerun, but the client got %q, not %q",
			last.ID, last.EndReason, code, want)
	}
}

// served is the replica of the last attempt: the only one whose bytes may have reached
// the client.
func (h *history) served() string {
	if n := len(h.journal.Attempts); n > 0 {
		return h.journal.Attempts[n-1].Replica
	}
	return ""
}

// readStream parses the client's events choice by choice, reporting what no stream may
// contain wherever it ends.
func readStream(h *history, fail failFunc) *stream {
	r, s := h.req, &h.req.seen
	c := r.choices()
	st := &stream{text: make([]string, c), tokens: make([]int, c), finish: make([]string, c), toolName: make([]string, c), toolArgs: make([]string, c)}
	served := h.served()
	for i, d := range s.events {
		if st.errEvent != nil {
			fail(rShape, "event after the final error event: %q", d)
			break
		}
		if st.done {
			fail(rShape, "event after [DONE]: %q", d)
			break
		}
		if d == "[DONE]" {
			st.done = true
			continue
		}
		var ch chunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			fail(rShape, "event is not JSON: %.200q", d)
			continue
		}
		if ch.Error != nil {
			st.errEvent = ch.Error
			continue
		}
		if bytes.Contains([]byte(d), []byte(`"error"`)) {
			fail(rShape, "an ordinary chunk carries an \"error\" key: %.200q", d)
		}
		if r.endpoint == "chat" && i == 0 && (len(ch.Choices) == 0 || ch.Choices[0].Delta.Role != "assistant") {
			fail(rShape, "the first event is not the role chunk: %.200q", d)
		}
		if ch.Usage != nil {
			if len(ch.Choices) == 0 {
				n := ch.Usage.CompletionTokens
				st.usageFinal = &n
			} else {
				st.usageInChunks = true
			}
		}
		for _, choice := range ch.Choices {
			k := choice.Index
			if k < 0 || k >= c {
				fail(rShape, "choice index %d of an answer with %d choices", k, c)
				continue
			}
			piece := ""
			if choice.Text != nil {
				piece = *choice.Text
			}
			if choice.Delta.Content != nil {
				piece += *choice.Delta.Content
			}
			args := ""
			for _, call := range choice.Delta.ToolCalls {
				if call.ID != nil {
					if want := toolCallID(s.requestID, k, call.Index, h.toolIDShape[served]); want != "" && *call.ID != want {
						fail(rToolID, "tool call %d of choice %d has id %q, want %q (derived from the request id)", call.Index, k, *call.ID, want)
					}
				}
				if call.Function.Name != nil {
					st.toolName[k] += *call.Function.Name
				}
				args += call.Function.Arguments
			}
			if st.finish[k] != "" && (piece != "" || args != "") {
				fail(rShape, "choice %d has output after its finish_reason", k)
			}
			st.text[k] += piece
			st.toolArgs[k] += args
			st.tokens[k] = words(st.text[k]) + argumentTokens(st.toolArgs[k])
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				st.finish[k] = *choice.FinishReason
			}
			if r.continuousUsage && ch.Usage != nil && ch.Usage.CompletionTokens != st.tokens[k] {
				fail(rTokens, "choice %d's chunk reports %d completion tokens, the client has %d of that choice", k, ch.Usage.CompletionTokens, st.tokens[k])
			}
		}
	}
	return st
}

// judgeStream checks an SSE answer: one complete answer from one replica, or a prefix of
// one replica's answer and exactly one interruption, or an error before output.
func judgeStream(h *history, fail failFunc) (string, *stream) {
	r, s, j := h.req, &h.req.seen, h.journal
	var st *stream
	switch r.protocol() {
	case "messages":
		st = readMessagesStream(h, fail)
	case "responses":
		st = readResponsesStream(h, fail)
	default:
		st = readStream(h, fail)
	}
	if len(j.Attempts) == 0 {
		fail(rJournal, "journal has no attempt for a 200 answer")
		return "", st
	}
	served := h.served()
	ans, ok := h.answers[served]
	if !ok || ans.err != nil {
		fail(rReference, "reference answer of %s: %v", served, ans.err)
		return "", st
	}
	if len(ans.choices) != r.choices() {
		fail(rReference, "%s answers %d choices, the request asks for %d", served, len(ans.choices), r.choices())
		return "", st
	}
	prefixes := func() {
		for k := range st.text {
			if !strings.HasPrefix(ans.choices[k].text, st.text[k]) || !strings.HasPrefix(ans.choices[k].toolArgs, st.toolArgs[k]) {
				fail(rSplice, "choice %d got %q%s, which is not a prefix of %s's answer %q%s (spliced or repeated output)",
					k, st.text[k], st.toolArgs[k], served, ans.choices[k].text, ans.choices[k].toolArgs)
			}
		}
	}
	delivered := st.delivered()
	// counted is what the gateway must count as delivered before the end: every token for
	// chat (from the engine's per-chunk usage), one per output-bearing delta event for
	// the Messages and Responses APIs, whose engines report usage only at the end.
	counted, countedWhat := delivered, "the client received"
	if r.protocol() != "chat" {
		counted, countedWhat = st.deltas, "output-bearing delta events reached the client"
	}
	switch {
	case st.done && st.errEvent == nil:
		for k := range st.text {
			if st.finish[k] == "" {
				fail(rCutDone, "[DONE] although choice %d never finished (a cut choice passed off as complete)", k)
			}
			want := ans.choices[k]
			if st.text[k] != want.text || st.toolArgs[k] != want.toolArgs || st.toolName[k] != want.toolName {
				fail(rSplice, "choice %d completed with %q%s, but %s answers %q%s (spliced, repeated or truncated output)",
					k, st.text[k], st.toolArgs[k], served, want.text, want.toolArgs)
			}
			if !r.tools && st.finish[k] != "" && st.finish[k] != want.finish {
				fail(rSplice, "choice %d finished %q, %s finishes it %q", k, st.finish[k], served, want.finish)
			}
		}
		if j.Outcome != "completed" {
			fail(rJournal, "client completed, journal says %s", j.Outcome)
		}
		if j.DeliveredOutputTokens != delivered {
			fail(rTokens, "journal counts %d delivered tokens, the client received %d", j.DeliveredOutputTokens, delivered)
		}
		if r.includeUsage && (st.usageFinal == nil || *st.usageFinal != delivered) {
			fail(rTokens, "the usage chunk the client asked for is %v, the client received %d tokens", fmtPtr(st.usageFinal), delivered)
		}
		if r.protocol() != "chat" && (st.usageFinal == nil || *st.usageFinal != delivered) {
			fail(rTokens, "the answer's final usage says %s output tokens, the client received %d", fmtPtr(st.usageFinal), delivered)
		}
		judgeUsage(h, st, fail)
		if len(j.Attempts) > 1 {
			return "rerun-completed", st
		}
		return "completed", st
	case st.errEvent != nil && (st.errEvent.Code == "upstream_decode_interrupted" || (r.engineTool && st.errEvent.Code == engineActedCode && st.output())):
		e := st.errEvent
		if e.PartialOutput == nil || !*e.PartialOutput || e.Retryable == nil || *e.Retryable || e.RequestID != s.requestID {
			fail(rShape, "interruption event is not a partial, non-retryable error of this request: %+v", *e)
		}
		if e.DeliveredOutputTokens == nil || *e.DeliveredOutputTokens != counted {
			fail(rTokens, "interruption says %s delivered tokens, %d %s", fmtPtr(e.DeliveredOutputTokens), counted, countedWhat)
		}
		if counted > delivered {
			fail(rTokens, "%d %s, more than the %d tokens they carry", counted, countedWhat, delivered)
		}
		if !st.output() {
			fail(rShape, "interrupted, but no output was delivered")
		}
		prefixes()
		if j.Outcome != "interrupted" || !j.FirstDeltaSent {
			fail(rJournal, "client was interrupted after output, journal says %s (first_delta_sent %v)", j.Outcome, j.FirstDeltaSent)
		}
		if j.DeliveredOutputTokens != counted {
			fail(rTokens, "journal counts %d delivered tokens, %d %s before the interruption", j.DeliveredOutputTokens, counted, countedWhat)
		}
		judgeUsage(h, st, fail)
		return "interrupted", st
	case st.errEvent != nil:
		judgeUnfencedError(h, st.errEvent.Code, fail)
		if st.output() || st.errEvent.PartialOutput == nil || *st.errEvent.PartialOutput {
			fail(rShape, "error event %q after %d tokens of output", st.errEvent.Code, delivered)
		}
		if j.Outcome != "failed" {
			fail(rJournal, "client got an error before output, journal says %s", j.Outcome)
		}
		judgeUsage(h, st, fail)
		return "failed", st
	case s.left || s.stalled:
		// The client stopped reading: what it has must still be a prefix of one answer.
		prefixes()
		judgeUsage(h, st, fail)
		if s.left {
			return "left", st
		}
		return "stalled", st
	}
	if st.done {
		fail(rCutDone, "[DONE] and an error event in one stream")
		return "", st
	}
	fail(rTruncation, "the stream ended with neither its end event nor an error event after %d tokens (silent truncation)", delivered)
	return "", st
}

// judgeUsage: usage reaches the client only when it asked for it (the gateway asks the
// engine for per-chunk usage to count tokens, and must strip it again).
func judgeUsage(h *history, st *stream, fail failFunc) {
	r := h.req
	if r.protocol() != "chat" {
		return // the Messages and Responses APIs report usage in their own events, always
	}
	switch {
	case !r.includeUsage && (st.usageFinal != nil || st.usageInChunks):
		fail(rUsage, "usage reached a client that did not ask for it")
	case r.includeUsage && !r.continuousUsage && st.usageInChunks:
		fail(rUsage, "per-chunk usage reached a client that asked only for the final usage")
	}
}

// proofOfEnd are the engine outcomes that prove an attempt stopped on the engine's side
// before the gateway gave up on it: an error answer, a refusal, a reset, a crash, a close.
// Only after one of them may a direct-mode request run again.
var proofOfEnd = map[string]bool{sim.OutcomeError: true, sim.OutcomeRejected: true, sim.OutcomeReset: true,
	sim.OutcomeCrashed: true, sim.OutcomeDropped: true}

// silentOutcome are the engine outcomes of a request that stopped answering without
// ending: a hang, a malformed or oversized event followed by silence, or an error event
// followed by silence (an error report proves nothing until the stream ends).
var silentOutcome = map[string]bool{sim.OutcomeHung: true, sim.OutcomeGarbage: true, sim.OutcomeOversize: true,
	sim.OutcomeErrorHung: true}

// judgeAttempts checks the journal's attempts against the engines' records: every engine
// request is an attempt the journal knows, ran once, ended; no two ran at once; and in
// direct mode nothing ran again after an attempt that might still have been decoding.
func judgeAttempts(h *history, fail failFunc) {
	j := h.journal
	known := map[string]bool{}
	for i, a := range j.Attempts {
		known[a.ID] = true
		if j.Phase == "done" && a.EndedAt.IsZero() {
			fail(rJournal, "attempt %s has no end although the request is done", a.ID)
		}
		if i < len(j.Attempts)-1 && !h.fenced && a.Failure == "uncertain" {
			fail(rUncertainRerun, "attempt %s on %s ended uncertain (%s) and the request ran again on %s: without an agent nothing proves the first one stopped",
				a.ID, a.Replica, a.EndReason, j.Attempts[i+1].Replica)
		}
	}
	byID := map[string]journalAttempt{}
	for _, a := range j.Attempts {
		byID[a.ID] = a
	}
	seenAttempt := map[string]bool{}
	for i, rec := range h.records {
		// An engine that went silent, or wrote what the gateway cannot read and then
		// stayed silent, never proved it stopped: the gateway closed the stream itself. (In
		// fenced mode the agent reads the engine and may close the stream after ending the
		// engine request, which is proof.)
		if a, ok := byID[rec.AttemptID]; ok && !h.fenced && silentOutcome[rec.Outcome] && a.Failure != "" && a.Failure != "uncertain" {
			fail(rClass, "attempt %s ended %s (%s), but its engine request was %q and never ended on its own: uncertain",
				a.ID, a.Failure, a.EndReason, rec.Outcome)
		}
		if rec.Outcome == "" {
			fail(rZombie, "attempt %s is still running on the engine after the request ended", rec.AttemptID)
		}
		if !known[rec.AttemptID] {
			fail(rUnknownAttempt, "the engine ran %s (attempt %q), which the journal does not know", rec.ID, rec.AttemptID)
		}
		if seenAttempt[rec.AttemptID] {
			fail(rUnknownAttempt, "the engine ran attempt %s twice (a silent resend the gateway never counted)", rec.AttemptID)
		}
		seenAttempt[rec.AttemptID] = true
		if i == 0 {
			continue
		}
		prev := h.records[i-1]
		// An engine that answered with an error had finished that request when it wrote
		// the answer; it records the end a moment later, which a fast rerun may beat.
		answered := prev.Outcome == sim.OutcomeError || prev.Outcome == sim.OutcomeRejected
		engineEnded := proofOfEnd[prev.Outcome] && (answered || !prev.Ended.After(rec.Started))
		if h.fenced {
			// The proof is the agent's: it closed the engine connection of the previous
			// attempt (the engine notices a moment later, on its own). An attempt the engine
			// itself ended (an error answer, a reset, a crash) is rerun at once; the agent
			// closes its connection a moment later.
			if ended, ok := h.agentEnds[prev.AttemptID]; !engineEnded && (!ok || ended.After(rec.Started)) {
				fail(rOverlap, "attempt %s started at %s before the agent ended %s (at %s, ok=%v; the engine request ended %q)",
					rec.AttemptID, clock(rec.Started), prev.AttemptID, clock(ended), ok, prev.Outcome)
			}
			continue
		}
		if !proofOfEnd[prev.Outcome] {
			fail(rUncertainRerun, "attempt %s ran after %s, whose engine request ended %q, which proves nothing (direct mode must not rerun it)",
				rec.AttemptID, prev.AttemptID, prev.Outcome)
		} else if !engineEnded {
			fail(rOverlap, "attempt %s started at %s while %s ran until %s", rec.AttemptID, clock(rec.Started), prev.AttemptID, clock(prev.Ended))
		}
	}
}

// judgeClient checks what became of a request whose client stalled or left.
func judgeClient(h *history, st *stream, fail failFunc) {
	s, j := &h.req.seen, h.journal
	var last *journalAttempt
	if n := len(j.Attempts); n > 0 {
		last = &j.Attempts[n-1]
	}
	var lastRec *sim.Record
	if n := len(h.records); n > 0 && last != nil && h.records[n-1].AttemptID == last.ID {
		lastRec = &h.records[n-1]
	}
	for i := 0; i+1 < len(j.Attempts); i++ {
		if a := j.Attempts[i]; a.EndReason == "client_gone" || a.EndReason == "client_stalled" {
			fail(rLeave, "attempt %s ended because the client went away (%s), and another attempt followed", a.ID, a.EndReason)
		}
	}
	if st != nil && st.output() && !j.FirstDeltaSent {
		fail(rJournal, "the client received output, the journal says first_delta_sent false")
	}
	switch {
	case s.stalled && s.status == http.StatusOK:
		if !s.stallEnded {
			fail(rStall, "the request was not done (%v) when its client, which had stopped reading, gave up waiting: a stalled client holds its request", s.stallErr)
			return
		}
		upstreamFailed := false
		for _, a := range j.Attempts {
			upstreamFailed = upstreamFailed || a.Failure != ""
		}
		if upstreamFailed {
			return // an engine failure ended it first: judged as any other history
		}
		if j.Outcome != "client_stalled" {
			fail(rStall, "the client stopped reading and the request ended %q, not client_stalled", j.Outcome)
		}
		if last == nil || last.EndReason != "client_stalled" || !last.CancelSent {
			fail(rStall, "the last attempt of a stalled client's request ended %+v, not cancelled for client_stalled", last)
		}
		// Its engine request is cancelled, unless the engine had finished it already (the
		// rest of the answer waiting in buffers) or crashed.
		finishedFirst := lastRec != nil && lastRec.Outcome == sim.OutcomeFinished && last != nil && lastRec.Ended.Before(last.EndedAt)
		if lastRec != nil && lastRec.Outcome != sim.OutcomeCancelled && lastRec.Outcome != sim.OutcomeCrashed && !finishedFirst {
			fail(rStall, "the engine request of a stalled client ended %q, not cancelled", lastRec.Outcome)
		}
		// The gateway's writes went on into the buffers after the client stopped reading,
		// so its last accepted byte came later still: a stall is never declared sooner than
		// the write timeout after the client stopped.
		if last != nil && h.writeTimeout > 0 && last.EndReason == "client_stalled" && last.EndedAt.Sub(s.stoppedAt) < h.writeTimeout*9/10 {
			fail(rStall, "the client was declared stalled %s after it stopped reading, sooner than client_write_timeout (%s)",
				last.EndedAt.Sub(s.stoppedAt).Round(time.Millisecond), h.writeTimeout)
		}
	case s.left:
		switch j.Outcome {
		case "cancelled":
			// The attempt that ran when the client left is cancelled for it (one that an
			// upstream failure had ended already, its rerun not yet started, is not).
			if last != nil && last.Failure == "" && (!last.CancelSent || last.EndReason != "client_gone") {
				fail(rLeave, "the client left, but its last attempt ended %q (cancel sent %v)", last.EndReason, last.CancelSent)
			}
			if lastRec != nil && lastRec.Outcome != sim.OutcomeCancelled && lastRec.Outcome != sim.OutcomeFinished && lastRec.Outcome != sim.OutcomeCrashed {
				fail(rLeave, "the client left, its engine request ended %q", lastRec.Outcome)
			}
		case "completed", "interrupted", "failed":
			// The gateway finished first; the client left with the end in its buffers.
		default:
			fail(rLeave, "the client left, the journal says %q", j.Outcome)
		}
	default:
		if j.Outcome == "cancelled" || j.Outcome == "client_stalled" {
			fail(rJournal, "the client read everything, the journal says %s", j.Outcome)
		}
	}
}

// judgeRetries checks a keyed request's retries: the same answer byte for byte, or the
// same interruption, or the same error; never a new run, and never "in use" once the
// original's client has seen the end.
func judgeRetries(h *history, fail failFunc) {
	r, s, j := h.req, &h.req.seen, h.journal
	if r.key == "" {
		return
	}
	if x := r.inflight; x != nil && !(x.status == http.StatusConflict && errorCode(*x) == "idempotency_key_in_use") {
		if msg := replayMismatch(h, x); msg != "" {
			fail(rReplay, "the retry sent while the request ran got neither 409 idempotency_key_in_use nor the replay: %s", msg)
		}
	}
	x := r.retry
	if x == nil {
		if s.requestID != "" && s.err == nil {
			fail(rReplay, "the keyed request was not retried")
		}
		return
	}
	if x.status == http.StatusConflict && errorCode(*x) == "idempotency_key_in_use" {
		fail(rDurable, "the retry after the end found the request still in use: its outcome (%s) was not durable before its client saw the end", j.Outcome)
		return
	}
	if msg := replayMismatch(h, x); msg != "" {
		fail(rReplay, "retry: %s", msg)
	}
	started := map[string]time.Time{}
	for _, a := range j.Attempts {
		started[a.ID] = a.StartedAt
	}
	for _, rec := range h.records {
		if !rec.Started.After(x.sentAt) {
			continue
		}
		if at, ok := started[rec.AttemptID]; ok && at.Before(x.sentAt) {
			// An attempt of the original run, sent before the retry, that reached the
			// engine late (the gateway had given up on it): not a run of the retry.
			continue
		}
		fail(rRerunOnRetry, "the retry ran the request again: %s started on the engine after the retry was sent", rec.AttemptID)
	}
}

// replayMismatch says how x, an answer to a retry of h's keyed request after it ended,
// differs from what the contract says it must be ("" when it does not).
func replayMismatch(h *history, x *seen) string {
	s, j := &h.req.seen, h.journal
	if x.err != nil {
		return fmt.Sprintf("transport error %v", x.err)
	}
	if x.requestID != s.requestID {
		return fmt.Sprintf("answered as %s, the original was %s", x.requestID, s.requestID)
	}
	if !x.replayed {
		return fmt.Sprintf("%d without Idempotent-Replayed: true", x.status)
	}
	code := errorCode(*x)
	switch j.Outcome {
	case "completed":
		if x.status != http.StatusOK {
			return fmt.Sprintf("%d %s for a completed request", x.status, code)
		}
		whole := h.req.client == clientNormal && s.err == nil
		if whole && !bytes.Equal(x.raw, s.raw) {
			return fmt.Sprintf("the replay differs from the original response (%d bytes against %d)", len(x.raw), len(s.raw))
		}
		if !whole && !bytes.HasPrefix(x.raw, s.raw) {
			return "the replay does not begin with what the original client received"
		}
	case "interrupted":
		e, problem := errorBodyProblem(h.req, x.status, x.raw)
		if x.status != http.StatusBadGateway || e == nil || e.Code != "upstream_decode_interrupted" {
			return fmt.Sprintf("%d %s for an interrupted request, not the same interruption", x.status, code)
		}
		if problem != "" {
			return "the replayed interruption is not in the API's shape: " + problem
		}
		if e.DeliveredOutputTokens == nil || *e.DeliveredOutputTokens != j.DeliveredOutputTokens || e.RequestID != s.requestID {
			return fmt.Sprintf("the replayed interruption says %s tokens of %s, the journal %d of %s",
				fmtPtr(e.DeliveredOutputTokens), e.RequestID, j.DeliveredOutputTokens, s.requestID)
		}
	case "failed":
		if s.status == http.StatusOK {
			// The error went out as an event after keepalives: the stream is replayed.
			if x.status != http.StatusOK || (h.req.client == clientNormal && !bytes.Equal(x.raw, s.raw)) {
				return fmt.Sprintf("%d (%d bytes) for a failed stream of %d bytes", x.status, len(x.raw), len(s.raw))
			}
			return ""
		}
		if x.status != s.status || code != errorCode(*s) {
			return fmt.Sprintf("%d %s, the original was %d %s", x.status, code, s.status, errorCode(*s))
		}
	case "cancelled", "client_stalled":
		if x.status != http.StatusConflict || code != "idempotency_key_cancelled" {
			return fmt.Sprintf("%d %s for a request its client left (%s), not 409 idempotency_key_cancelled", x.status, code, j.Outcome)
		}
	default:
		return fmt.Sprintf("%d %s for a request the journal says is %q", x.status, code, j.Outcome)
	}
	return ""
}

func fmtPtr(p *int) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func clock(t time.Time) string { return t.Format("15:04:05.000000") }

// engineActedCode is the error of a request not rerun because its engine may have run a
// tool (docs/design.md §5).
const engineActedCode = "upstream_failed_after_tool_use"

// judgeEngineTool checks a request whose engine runs a tool itself: the tool ran at most
// once for it, whatever failed and whoever retried; and once it ran, an error the client
// got says so and is not retryable (a client that sends the request again runs it again).
func judgeEngineTool(h *history, st *stream, fail failFunc) {
	if h.toolCalls > 1 {
		fail(rToolTwice, "the engine-run tool ran %d times for this request (over %d attempts): a rerun acted again", h.toolCalls, len(h.journal.Attempts))
	}
	if h.toolCalls > 0 && !h.req.engineTool {
		fail(rToolTwice, "the engines ran a tool for a request that declared none")
	}
	if h.toolCalls == 0 || !h.req.engineTool {
		return
	}
	s := &h.req.seen
	var e *apiError
	switch {
	case st != nil:
		e = st.errEvent
	case s.status != http.StatusOK:
		e, _ = errorBodyProblem(h.req, s.status, s.raw)
	}
	if e == nil {
		return
	}
	if e.Code != engineActedCode || e.Retryable == nil || *e.Retryable {
		fail(rClass, "the engine ran the tool, then the client got %q (retryable %s), not a non-retryable %s", e.Code, fmtBoolPtr(e.Retryable), engineActedCode)
	}
}

func fmtBoolPtr(b *bool) string {
	if b == nil {
		return "absent"
	}
	return fmt.Sprint(*b)
}
