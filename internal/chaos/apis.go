package chaos

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/enginetool"
	"github.com/fencegate/fencegate/internal/gateway"
)

// The Messages and Responses APIs carry the same contract as chat in their own events
// (docs/design.md §2): the readers below turn a client's events into the stream the rules
// of judgeStream read (one choice: its text, tool call, finish and tokens), and report on
// the way what no stream of that API may contain. Their finish is put in chat's words
// (stop, length, tool_calls), as the sim's reference answers are chat's.

// messagesFinish is the chat finish_reason a Messages stop_reason stands for.
func messagesFinish(stopReason string) string {
	switch stopReason {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "end_turn":
		return "stop"
	}
	return stopReason
}

// responsesFinish is the chat finish_reason of a response's final status.
func responsesFinish(status string) string {
	switch status {
	case "incomplete":
		return "length"
	case "completed":
		return "stop"
	}
	return status
}

// anthropicErrorType is the error type the Anthropic SDKs expect for an HTTP status. It
// is written here from Anthropic's documented error types, not taken from the gateway's
// encoder (internal/protocol), so that the check can catch that encoder getting one wrong.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}

// errorBodyProblem says what is wrong with an error body of status for r's API ("" when
// it is in the API's own shape): Anthropic's {"type":"error","error":{"type":…}} with the
// type its SDKs expect for the status, or OpenAI's {"error":{…}}; either with a code and
// a message.
func errorBodyProblem(r *request, status int, raw []byte) (*apiError, string) {
	var env struct {
		Type  string    `json:"type"`
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
		return nil, "no error object with a code and a message"
	}
	if r.endpoint == "messages" {
		if want := anthropicErrorType(status); env.Type != "error" || env.Error.Type != want {
			return env.Error, fmt.Sprintf("not the Anthropic shape: type %q, error.type %q (want \"error\", %q)", env.Type, env.Error.Type, want)
		}
	} else if env.Type != "" {
		return env.Error, fmt.Sprintf("not the OpenAI shape: a top-level type %q", env.Type)
	}
	return env.Error, ""
}

// newStream is an empty stream of c choices.
func newStream(c int) *stream {
	return &stream{text: make([]string, c), tokens: make([]int, c), finish: make([]string, c), toolName: make([]string, c), toolArgs: make([]string, c)}
}

// responsesShapeID is a call_id in the shape the sim's Responses API makes them ("call_"
// and hex while streaming, "chatcmpl-tool-" in the final response; the gateway gives both
// OpenAI's shape).
const responsesShapeID = "call_00000000000000000000000000000000"

// readMessagesStream reads a Messages stream: text and tool input from the deltas, the
// tool_use block's id and name, the stop_reason and usage of message_delta; the end is
// message_stop, the interruption one `event: error` with an api_error after which nothing
// comes.
func readMessagesStream(h *history, fail failFunc) *stream {
	s := &h.req.seen
	st := newStream(1)
	shape := h.toolIDShape[h.served()]
	for i, d := range s.events {
		name := s.names[i]
		if st.errEvent != nil {
			fail(rShape, "event %q after the final error event: %.200q", name, d)
			break
		}
		if st.done {
			fail(rShape, "event %q after message_stop: %.200q", name, d)
			break
		}
		var ev struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock *struct {
				Type string `json:"type"`
				ID   string `json:"id"`
				Name string `json:"name"`
				Text string `json:"text"`
			} `json:"content_block"`
			Delta *struct {
				Type        string  `json:"type"`
				Text        string  `json:"text"`
				PartialJSON string  `json:"partial_json"`
				Thinking    string  `json:"thinking"`
				StopReason  *string `json:"stop_reason"`
			} `json:"delta"`
			Usage *struct {
				OutputTokens *int `json:"output_tokens"`
			} `json:"usage"`
			Error *apiError `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			fail(rShape, "event %q is not JSON: %.200q", name, d)
			continue
		}
		if name != ev.Type {
			fail(rShape, "event %q carries type %q (a Messages event is named by its type)", name, ev.Type)
		}
		switch ev.Type {
		case "message_start", "ping", "content_block_stop":
		case "content_block_start":
			if cb := ev.ContentBlock; cb != nil && cb.Type == "tool_use" {
				if want := toolCallID(s.requestID, 0, ev.Index, shape); want != "" && cb.ID != want {
					fail(rToolID, "tool_use block %d has id %q, want %q (derived from the request id)", ev.Index, cb.ID, want)
				}
				st.toolName[0] = cb.Name
			} else if cb != nil {
				st.text[0] += cb.Text
			}
		case "content_block_delta":
			if ev.Delta == nil {
				fail(rShape, "content_block_delta without a delta: %.200q", d)
				continue
			}
			piece := ev.Delta.Text + ev.Delta.PartialJSON + ev.Delta.Thinking
			if piece != "" {
				st.deltas++
			}
			if st.finish[0] != "" && piece != "" {
				fail(rShape, "a delta after the message's stop_reason")
			}
			st.text[0] += ev.Delta.Text
			st.toolArgs[0] += ev.Delta.PartialJSON
		case "message_delta":
			if ev.Delta != nil && ev.Delta.StopReason != nil {
				st.finish[0] = messagesFinish(*ev.Delta.StopReason)
			}
			if ev.Usage != nil && ev.Usage.OutputTokens != nil {
				n := *ev.Usage.OutputTokens
				st.usageFinal = &n
			}
		case "message_stop":
			st.done = true
		case "error":
			if ev.Error == nil {
				fail(rShape, "an error event without an error object: %.200q", d)
				continue
			}
			st.errEvent = ev.Error
			// The gateway's own event (it never forwards an engine's): the SDKs raise it
			// as an APIError of type api_error, whatever the status would have been.
			if ev.Error.Type != "api_error" {
				fail(rShape, "the final error event has type %q, not api_error: %.200q", ev.Error.Type, d)
			}
		default:
			fail(rShape, "an event of unknown type %q: %.200q", ev.Type, d)
		}
		st.tokens[0] = words(st.text[0]) + argumentTokens(st.toolArgs[0])
	}
	return st
}

// responsesEvent is what the checker reads of a Responses event.
type responsesEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int64          `json:"sequence_number"`
	Delta          *string         `json:"delta"`
	OutputIndex    int             `json:"output_index"`
	Item           *responsesItem  `json:"item"`
	Response       *responseObject `json:"response"`
	Code           string          `json:"code"`
	Error          *apiError       `json:"error"`
}

type responsesItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// deliveredOutput is the message text and function call arguments of a response's
// output items.
func deliveredOutput(items []responsesItem) (text, args string) {
	for _, item := range items {
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				if c.Type == "output_text" {
					text += c.Text
				}
			}
		case "function_call":
			args += item.Arguments
		}
	}
	return text, args
}

// responseObject is a Responses API response: a whole answer, or the response of a
// lifecycle or terminal event.
type responseObject struct {
	ID     string          `json:"id"`
	Object string          `json:"object"`
	Status string          `json:"status"`
	Output []responsesItem `json:"output"`
	Usage  *struct {
		OutputTokens *int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// checkCallIDs reports every function_call of output whose call_id is not the one derived
// from the request id and its output index.
func checkCallIDs(requestID string, output []responsesItem, where string, fail failFunc) {
	for i, item := range output {
		if item.Type != "function_call" {
			continue
		}
		if want := gateway.ResponsesCallID(requestID, i, responsesShapeID); item.CallID != want {
			fail(rToolID, "function_call %d of %s has call_id %q, want %q (derived from the request id)", i, where, item.CallID, want)
		}
	}
}

// readResponsesStream reads a Responses stream: text and arguments from the *.delta
// events, the function_call item (its call_id the same in every event), the final status
// and usage of response.completed (or .incomplete); the sequence numbers count up by one
// from 0. The interruption is an `error` event numbered next, with the error as an object,
// and then exactly one response.failed, numbered after it, with the same code and the
// response's id; nothing after that.
func readResponsesStream(h *history, fail failFunc) *stream {
	s := &h.req.seen
	st := newStream(1)
	seq, failed := int64(-1), false
	for i, d := range s.events {
		name := s.names[i]
		if failed {
			fail(rShape, "event %q after response.failed: %.200q", name, d)
			break
		}
		if st.done {
			fail(rShape, "event %q after the response ended: %.200q", name, d)
			break
		}
		var ev responsesEvent
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			fail(rShape, "event %q is not JSON: %.200q", name, d)
			continue
		}
		if name != ev.Type {
			fail(rShape, "event %q carries type %q (a Responses event is named by its type)", name, ev.Type)
		}
		switch {
		case ev.SequenceNumber == nil:
			fail(rShape, "event %q has no sequence_number", name)
		case *ev.SequenceNumber != seq+1:
			fail(rShape, "event %q has sequence_number %d after %d (each event numbers the next)", name, *ev.SequenceNumber, seq)
			seq = *ev.SequenceNumber
		default:
			seq = *ev.SequenceNumber
		}
		if st.errEvent != nil && ev.Type != "response.failed" {
			fail(rShape, "event %q after the error event, where response.failed must come", name)
			break
		}
		if (ev.Item != nil && enginetool.AnnouncesEngineCall([]byte(ev.Item.Type))) || enginetool.EngineCallEvent([]byte(ev.Type)) {
			st.engineCall = true
		}
		if it := ev.Item; it != nil && it.Type == "function_call" {
			if want := gateway.ResponsesCallID(s.requestID, ev.OutputIndex, responsesShapeID); it.CallID != want {
				fail(rToolID, "function_call %d in %s has call_id %q, want %q (derived from the request id)", ev.OutputIndex, name, it.CallID, want)
			}
			st.toolName[0] = it.Name
		}
		switch ev.Type {
		case "response.created", "response.queued", "response.in_progress":
			if ev.Response != nil && st.responseID == "" {
				st.responseID = ev.Response.ID
			}
		case "response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta":
			if ev.Delta != nil && *ev.Delta != "" {
				st.deltas++
				st.engineArgs += *ev.Delta
			}
		case "response.output_text.delta", "response.function_call_arguments.delta":
			piece := ""
			if ev.Delta != nil {
				piece = *ev.Delta
			}
			if piece != "" {
				st.deltas++
			}
			if ev.Type == "response.output_text.delta" {
				st.text[0] += piece
			} else {
				st.toolArgs[0] += piece
			}
		case "response.completed", "response.incomplete":
			st.done = true
			if ev.Response == nil {
				fail(rShape, "%s without its response", name)
				continue
			}
			st.finish[0] = responsesFinish(ev.Response.Status)
			if ev.Response.Usage != nil && ev.Response.Usage.OutputTokens != nil {
				n := *ev.Response.Usage.OutputTokens
				st.usageFinal = &n
			}
			checkCallIDs(s.requestID, ev.Response.Output, name, fail)
			if st.responseID != "" && ev.Response.ID != st.responseID {
				fail(rShape, "%s names response %s, response.created named %s", name, ev.Response.ID, st.responseID)
			}
		case "error":
			if ev.Error == nil || ev.Error.Code == "" || ev.Code != ev.Error.Code {
				fail(rShape, "the error event does not carry its code both at the top and as an error object: %.200q", d)
			}
			if ev.Error == nil {
				ev.Error = &apiError{Code: ev.Code}
			}
			st.errEvent = ev.Error
		case "response.failed":
			failed = true
			switch {
			case st.errEvent == nil:
				fail(rShape, "response.failed without an error event before it")
			case ev.Response == nil || ev.Response.Status != "failed" || ev.Response.Error == nil || ev.Response.Error.Code != st.errEvent.Code:
				fail(rShape, "response.failed does not fail the response with the error event's code %q: %.200q", st.errEvent.Code, d)
			case st.responseID != "" && ev.Response.ID != st.responseID:
				fail(rShape, "response.failed names response %s, but the client's response.created named %s", ev.Response.ID, st.responseID)
			}
			if ev.Response != nil {
				// Its output is what the events before it delivered, no more and no less.
				text, args := deliveredOutput(ev.Response.Output)
				if text != st.text[0] || args != st.toolArgs[0] {
					fail(rShape, "response.failed's output holds the text %.80q and arguments %.80q; the client received %.80q and %.80q",
						text, args, st.text[0], st.toolArgs[0])
				}
			}
		}
		st.tokens[0] = words(st.text[0]) + argumentTokens(st.toolArgs[0]) + argumentTokens(st.engineArgs)
	}
	if st.errEvent != nil && !failed && !s.left && !s.stalled {
		fail(rShape, "the error event is not followed by a terminal response.failed")
	}
	return st
}

// whole is what the checker reads of a whole (non-streamed) answer.
type whole struct {
	text, toolName, toolArgs, finish string
	// engineArgs is the text of the engine-run tool calls the answer lists.
	engineArgs string
	usage      *int
}

// judgeWhole checks a whole answer of the Messages or Responses API, or embeddings: the
// serving replica's own answer, complete, its tool call ids derived from the request id,
// its usage the tokens it carries, and the journal's story the same.
func judgeWhole(h *history, fail failFunc) string {
	r, s, j := h.req, &h.req.seen, h.journal
	if len(j.Attempts) == 0 {
		fail(rJournal, "journal has no attempt for a 200 answer")
		return ""
	}
	served := h.served()
	ans, ok := h.answers[served]
	if !ok || ans.err != nil {
		fail(rReference, "reference answer of %s: %v", served, ans.err)
		return ""
	}
	outcome := "completed"
	if len(j.Attempts) > 1 {
		outcome = "rerun-completed"
	}
	if j.Outcome != "completed" {
		fail(rJournal, "client got a whole answer, journal says %s", j.Outcome)
	}
	if r.endpoint == "embeddings" {
		judgeEmbeddings(h, ans, fail)
		return outcome
	}
	var w whole
	var err error
	switch r.endpoint {
	case "messages":
		w, err = readMessagesWhole(s.raw, s.requestID, h.toolIDShape[served], fail)
	default:
		w, err = readResponsesWhole(s.raw, s.requestID, fail)
	}
	if err != nil {
		fail(rShape, "the whole answer does not parse: %v: %.200q", err, s.raw)
		return outcome
	}
	if len(ans.choices) != 1 {
		fail(rReference, "%s answers %d choices, the request asks for 1", served, len(ans.choices))
		return outcome
	}
	want := ans.choices[0]
	args := w.toolArgs
	if r.endpoint == "messages" && want.toolArgs != "" {
		// A whole Messages answer carries the call's input as a JSON object, no longer as
		// the text the engine generated.
		args = compactJSON(w.toolArgs)
		want.toolArgs = compactJSON(want.toolArgs)
	}
	if w.text != want.text || args != want.toolArgs || w.toolName != want.toolName {
		fail(rSplice, "the whole answer is %q%s (tool %q), but %s answers %q%s (tool %q)", w.text, args, w.toolName, served, want.text, want.toolArgs, want.toolName)
	}
	if !r.tools && w.finish != want.finish {
		fail(rSplice, "the whole answer finished %q, %s finishes it %q", w.finish, served, want.finish)
	}
	tokens := words(want.text) + argumentTokens(ans.choices[0].toolArgs) + argumentTokens(w.engineArgs)
	if w.usage == nil || *w.usage != tokens {
		fail(rTokens, "the answer's usage says %s output tokens, the answer has %d", fmtPtr(w.usage), tokens)
	}
	if j.DeliveredOutputTokens != tokens {
		fail(rTokens, "journal counts %d delivered tokens, the whole answer has %d", j.DeliveredOutputTokens, tokens)
	}
	return outcome
}

func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// readMessagesWhole reads a whole Messages answer.
func readMessagesWhole(raw []byte, requestID, shape string, fail failFunc) (whole, error) {
	var m struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			OutputTokens *int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return whole{}, err
	}
	if m.Type != "message" || m.Role != "assistant" {
		fail(rShape, "a whole Messages answer of type %q, role %q", m.Type, m.Role)
	}
	var w whole
	for i, b := range m.Content {
		switch b.Type {
		case "text":
			w.text += b.Text
		case "tool_use":
			if want := toolCallID(requestID, 0, i, shape); want != "" && b.ID != want {
				fail(rToolID, "tool_use block %d has id %q, want %q (derived from the request id)", i, b.ID, want)
			}
			w.toolName, w.toolArgs = b.Name, string(b.Input)
		}
	}
	w.finish, w.usage = messagesFinish(m.StopReason), m.Usage.OutputTokens
	return w, nil
}

// readResponsesWhole reads a whole Responses answer.
func readResponsesWhole(raw []byte, requestID string, fail failFunc) (whole, error) {
	var resp responseObject
	if err := json.Unmarshal(raw, &resp); err != nil {
		return whole{}, err
	}
	if resp.Object != "response" {
		fail(rShape, "a whole Responses answer of object %q", resp.Object)
	}
	checkCallIDs(requestID, resp.Output, "the whole answer", fail)
	var w whole
	for _, item := range resp.Output {
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				if c.Type == "output_text" {
					w.text += c.Text
				}
			}
		case "function_call":
			w.toolName, w.toolArgs = item.Name, item.Arguments
		case "mcp_call", "code_interpreter_call":
			w.engineArgs += item.Arguments
		}
	}
	w.finish = responsesFinish(resp.Status)
	if resp.Usage != nil {
		w.usage = resp.Usage.OutputTokens
	}
	return w, nil
}

// judgeEmbeddings checks an embeddings answer: one vector per input, in input order, each
// the serving replica's own vector for that input, bit for bit; no output tokens.
func judgeEmbeddings(h *history, ans answer, fail failFunc) {
	r, s, j := h.req, &h.req.seen, h.journal
	served := h.served()
	var body struct {
		Object string `json:"object"`
		Data   []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(s.raw, &body); err != nil || body.Object != "list" {
		fail(rShape, "the embeddings answer does not parse as a list (%v): %.200q", err, s.raw)
		return
	}
	if len(body.Data) != len(r.prompts) || len(ans.vectors) != len(r.prompts) {
		fail(rSplice, "%d vectors for %d inputs (%s has %d)", len(body.Data), len(r.prompts), served, len(ans.vectors))
		return
	}
	for i, d := range body.Data {
		got, err := decodeVector(d.Embedding, r.base64)
		if err != nil {
			fail(rShape, "vector %d: %v", i, err)
			continue
		}
		if d.Index != i || !equalVectors(got, ans.vectors[i]) {
			fail(rSplice, "vector %d (index %d) is not %s's vector of input %d", i, d.Index, served, i)
		}
	}
	if j.DeliveredOutputTokens != 0 {
		fail(rTokens, "journal counts %d delivered tokens for embeddings, which have none", j.DeliveredOutputTokens)
	}
}

// decodeVector reads an embedding: a list of numbers, or base64 of little-endian float32s.
func decodeVector(raw json.RawMessage, b64 bool) ([]float32, error) {
	if !b64 {
		var fs []float64
		if err := json.Unmarshal(raw, &fs); err != nil {
			return nil, err
		}
		out := make([]float32, len(fs))
		for i, f := range fs {
			out[i] = float32(f)
		}
		return out, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return nil, fmt.Errorf("not base64 of float32s (%v)", err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

func equalVectors(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// judgeContinuation checks a Responses request that continues an earlier response of the
// run (previous_response_id): the engine keeps that response in its own memory, so the
// request runs on the replica that produced it or nowhere. Every attempt, and every engine
// request, is on that replica; previous_response_unavailable (never retryable) comes only
// when that replica was down, overloaded or cut off, or its attempt failed before output;
// and that replica answers "not found" only if it restarted (and so forgot) since it made
// the response. A request that continues nothing never hears previous_response_unavailable.
func judgeContinuation(h *history, fail failFunc) {
	r, s, j := h.req, &h.req.seen, h.journal
	code := errorCode(*s)
	if r.prevID == "" {
		if code == "previous_response_unavailable" {
			fail(rPinned, "previous_response_unavailable for a request that continues no response")
		}
		return
	}
	if h.producer == "" {
		fail(rReference, "the replica that made response %s (request %d) is unknown", r.prevID, r.continues)
		return
	}
	// Where the response was made, and how (a response that came from a rerun is the
	// last attempt's), helps tell why a request went elsewhere.
	made := fmt.Sprintf("%s only (made by request %d", h.producer, r.continues)
	if h.producerAttempts > 1 {
		made += fmt.Sprintf(" on its attempt %d of %d", h.producerAttempts, h.producerAttempts)
	}
	made += ")"
	for _, a := range j.Attempts {
		if a.Replica != h.producer {
			fail(rPinned, "attempt %s ran on %s, but response %s, which it continues, is stored on %s", a.ID, a.Replica, r.prevID, made)
		}
	}
	for _, rec := range h.records {
		if on := h.recordOn[rec.ID]; on != h.producer {
			fail(rPinned, "the engine of %s ran %s (attempt %s), but response %s lives on %s", on, rec.ID, rec.AttemptID, r.prevID, made)
		}
	}
	switch {
	case code == "previous_response_unavailable":
		var env chunk
		if json.Unmarshal(s.raw, &env) == nil && env.Error != nil && (env.Error.Retryable == nil || *env.Error.Retryable) {
			fail(rShape, "previous_response_unavailable must say retryable: false (the same request cannot succeed elsewhere)")
		}
		if len(j.Attempts) == 0 && !h.troubled(h.producer, s.sentAt.Add(-troubleBefore), s.sentAt.Add(troubleAfter)) {
			fail(rPinned, "previous_response_unavailable without an attempt, though %s was neither down, overloaded nor cut off around %s", h.producer, clock(s.sentAt))
		}
	case s.status == http.StatusNotFound && h.served() == h.producer:
		// (Answered by another replica, the attempt is reported above.)
		if !h.crashedBetween(h.producer, h.producedAt, s.sentAt.Add(troubleAfter)) {
			fail(rPinned, "%s answered that it does not have response %s, though it has not restarted since it made it", h.producer, r.prevID)
		}
	}
}

// A replica counts as unavailable to a request sent at t when it crashed, answered 429 or
// 503, or had its link cut between t-troubleBefore and t+troubleAfter: the gateway keeps
// such a replica out for a while (its restart, dead_cooldown and probe, Retry-After, the
// lost heartbeat), and these spans cover that with a margin.
const (
	troubleBefore = 2 * time.Second
	troubleAfter  = time.Second
)

// troubled reports whether replica crashed, refused work as overloaded, or was cut off
// between from and to.
func (h *history) troubled(replica string, from, to time.Time) bool {
	if h.crashedBetween(replica, from, to) {
		return true
	}
	for _, t := range h.overloads[replica] {
		if !t.Before(from) && !t.After(to) {
			return true
		}
	}
	for _, c := range h.cuts[replica] {
		if c.start.Before(to) && c.end.After(from) {
			return true
		}
	}
	return false
}

// crashedBetween reports whether replica crashed between from and to.
func (h *history) crashedBetween(replica string, from, to time.Time) bool {
	for _, t := range h.crashes[replica] {
		if !t.Before(from) && !t.After(to) {
			return true
		}
	}
	return false
}

// isOverloadFault says whether a record's fault answered an engine 429 or 503.
func isOverloadFault(fault string) bool {
	return strings.Contains(fault, "status:429") || strings.Contains(fault, "status:503")
}
