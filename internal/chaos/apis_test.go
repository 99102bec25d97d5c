package chaos

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/sim"
)

// Crafted histories of the Messages and Responses APIs, of embeddings and of continued
// responses: each breaks one rule in the API's own terms, and a clean history of the same
// shape passes.

// ev is one named SSE event.
type ev struct{ name, data string }

// namedSSE joins named events into the bytes a client reads.
func namedSSE(events ...ev) []byte {
	var b strings.Builder
	for _, e := range events {
		if e.name != "" {
			b.WriteString("event: " + e.name + "\n")
		}
		b.WriteString("data: " + e.data + "\n\n")
	}
	return []byte(b.String())
}

// setNamed replaces what the client of h received.
func setNamed(h *history, events ...ev) {
	h.req.seen.raw = namedSSE(events...)
	h.req.seen.parse()
}

// apiHistory is a request of endpoint that sim-1 answered with " alpha bravo charlie
// delta" (cut by max_tokens) on its first attempt; the client's events are set apart.
func apiHistory(endpoint string) *history {
	h := cleanHistory(1)
	h.req.endpoint = endpoint
	h.toolIDShape = map[string]string{"sim-1": vllmToolID}
	return h
}

func messagesEvent(typ, body string) ev {
	return ev{typ, `{"type":"` + typ + `"` + body + `}`}
}

// messagesStart is what a Messages stream holds before its first output.
var messagesStart = []ev{
	messagesEvent("message_start", `,"message":{"id":"chatcmpl-1","content":[],"model":"sim-model","stop_reason":null,"usage":{"input_tokens":3,"output_tokens":0}}`),
	messagesEvent("content_block_start", `,"content_block":{"type":"text","text":""},"index":0`),
}

func messagesDelta(text string) ev {
	return messagesEvent("content_block_delta", fmt.Sprintf(`,"delta":{"type":"text_delta","text":%q},"index":0`, text))
}

// messagesEnd is a Messages stream's end: 4 tokens, cut by max_tokens.
var messagesEnd = []ev{
	messagesEvent("content_block_stop", `,"index":0`),
	messagesEvent("message_delta", `,"delta":{"stop_reason":"max_tokens"},"usage":{"input_tokens":3,"output_tokens":4}`),
	messagesEvent("message_stop", ""),
}

func messagesInterruption(delivered int) ev {
	return ev{"error", fmt.Sprintf(`{"type":"error","error":{"type":"api_error","message":"generation interrupted","code":"upstream_decode_interrupted","request_id":%q,"partial_output":true,"delivered_output_tokens":%d,"retryable":false}}`, testID, delivered)}
}

func events(parts ...[]ev) []ev {
	var out []ev
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestCleanAPIHistoriesPass(t *testing.T) {
	h := apiHistory("messages")
	setNamed(h, events(messagesStart, []ev{messagesDelta(" alpha bravo"), messagesDelta(" charlie delta")}, messagesEnd)...)
	if got := rules(h); len(got) > 0 {
		t.Errorf("a complete Messages stream was reported: %q", got)
	}
	h = interruptedMessages()
	if got := rules(h); len(got) > 0 {
		t.Errorf("an interrupted Messages stream was reported: %q", got)
	}
	h = apiHistory("responses")
	setNamed(h, completedResponses()...)
	if got := rules(h); len(got) > 0 {
		t.Errorf("a complete Responses stream was reported: %q", got)
	}
	h = interruptedResponses()
	if got := rules(h); len(got) > 0 {
		t.Errorf("an interrupted Responses stream was reported: %q", got)
	}
}

// interruptedMessages: two tokens in one delta, then the interruption. The gateway counts
// the one delta (the engine reports usage only at the end).
func interruptedMessages() *history {
	h := apiHistory("messages")
	setNamed(h, events(messagesStart, []ev{messagesDelta(" alpha bravo"), messagesInterruption(1)})...)
	h.journal.Outcome, h.journal.DeliveredOutputTokens = "interrupted", 1
	return h
}

func TestCheckerReportsAMessagesStreamThatGoesOnAfterTheInterruption(t *testing.T) {
	h := interruptedMessages()
	setNamed(h, events(messagesStart, []ev{messagesDelta(" alpha bravo"), messagesInterruption(1), messagesEvent("message_stop", "")})...)
	requireRule(t, h, rShape)
	// A chat-shaped interruption is not the Messages API's: its SDKs would not raise it.
	h = interruptedMessages()
	setNamed(h, events(messagesStart, []ev{messagesDelta(" alpha bravo"), {"", interruptionEvent(1)}})...)
	requireRule(t, h, rShape)
	// message_stop before every token: the answer passed off as complete.
	h = apiHistory("messages")
	setNamed(h, events(messagesStart, []ev{messagesDelta(" alpha bravo")}, messagesEnd)...)
	h.journal.DeliveredOutputTokens = 2
	requireRule(t, h, rSplice)
}

func TestCheckerReportsMessagesTokensCountedWrong(t *testing.T) {
	h := interruptedMessages()
	h.journal.DeliveredOutputTokens = 2
	requireRule(t, h, rTokens)
	h = apiHistory("messages")
	setNamed(h, events(messagesStart, []ev{messagesDelta(" alpha bravo"), messagesDelta(" charlie delta")}, messagesEnd)...)
	h.journal.DeliveredOutputTokens = 2 // the deltas, where the final usage says 4
	requireRule(t, h, rTokens)
}

func TestCheckerReportsAMessagesErrorInTheOpenAIShape(t *testing.T) {
	h := apiHistory("messages")
	setNamed(h)
	h.req.seen.status = http.StatusServiceUnavailable
	h.journal.Outcome, h.journal.FirstDeltaSent, h.journal.DeliveredOutputTokens = "failed", false, 0
	h.req.seen.raw = []byte(`{"type":"error","error":{"type":"overloaded_error","message":"busy","code":"no_healthy_replica"}}`)
	if got := rules(h); len(got) > 0 {
		t.Fatalf("an Anthropic error body was reported: %q", got)
	}
	h.req.seen.raw = []byte(`{"error":{"type":"server_error","message":"busy","code":"no_healthy_replica"}}`)
	requireRule(t, h, rShape)
	h.req.seen.raw = []byte(`{"type":"error","error":{"type":"api_error","message":"busy","code":"no_healthy_replica"}}`)
	requireRule(t, h, rShape) // 503 is overloaded_error to the Anthropic SDKs
}

func TestCheckerReportsAMessagesToolIDNotDerived(t *testing.T) {
	h := apiHistory("messages")
	h.req.tools = true
	h.answers["sim-1"] = answer{choices: []refChoice{{toolName: "lookup", toolArgs: `{"city": "red"}`, finish: "tool_calls"}}}
	id := gateway.ToolCallID(testID, 0, 0, vllmToolID)
	start := messagesEvent("content_block_start", `,"content_block":{"type":"tool_use","id":"`+id+`","name":"lookup","input":{}},"index":0`)
	args := messagesEvent("content_block_delta", `,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"red\"}"},"index":0`)
	end := []ev{messagesEvent("content_block_stop", `,"index":0`),
		messagesEvent("message_delta", `,"delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":3,"output_tokens":6}`),
		messagesEvent("message_stop", "")}
	h.journal.DeliveredOutputTokens = argumentTokens(`{"city": "red"}`)
	setNamed(h, events(messagesStart[:1], []ev{start, args}, end)...)
	if got := rules(h); len(got) > 0 {
		t.Fatalf("a tool call with the derived id was reported: %q", got)
	}
	start = messagesEvent("content_block_start", `,"content_block":{"type":"tool_use","id":"chatcmpl-tool-0123456789abcdef0123456789abcdef","name":"lookup","input":{}},"index":0`)
	setNamed(h, events(messagesStart[:1], []ev{start, args}, end)...)
	requireRule(t, h, rToolID)
}

func responsesEv(typ string, seq int, body string) ev {
	return ev{typ, fmt.Sprintf(`{%s"sequence_number":%d,"type":%q}`, body, seq, typ)}
}

// responsesStart is what a Responses stream holds before its first output (events 0-3).
var responsesStart = []ev{
	responsesEv("response.created", 0, `"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]},`),
	responsesEv("response.in_progress", 1, `"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]},`),
	responsesEv("response.output_item.added", 2, `"item":{"id":"i","content":[],"role":"assistant","status":"in_progress","type":"message"},"output_index":0,`),
	responsesEv("response.content_part.added", 3, `"content_index":0,"item_id":"i","output_index":0,"part":{"type":"output_text","text":""},`),
}

func responsesDelta(seq int, text string) ev {
	return responsesEv("response.output_text.delta", seq, fmt.Sprintf(`"content_index":0,"delta":%q,"item_id":"i","output_index":0,`, text))
}

// completedResponses: 4 tokens in two deltas, cut by max_output_tokens.
func completedResponses() []ev {
	return events(responsesStart, []ev{
		responsesDelta(4, " alpha bravo"), responsesDelta(5, " charlie delta"),
		responsesEv("response.output_text.done", 6, `"content_index":0,"item_id":"i","output_index":0,"text":" alpha bravo charlie delta",`),
		responsesEv("response.completed", 7, `"response":{"id":"resp_1","object":"response","status":"incomplete","output":[{"id":"msg_1","type":"message","content":[{"type":"output_text","text":" alpha bravo charlie delta"}]}],"usage":{"input_tokens":3,"output_tokens":4}},`),
	})
}

func responsesError(seq, delivered int) ev {
	return ev{"error", fmt.Sprintf(`{"type":"error","code":"upstream_decode_interrupted","message":"interrupted","param":null,"sequence_number":%d,"request_id":%q,"partial_output":true,"delivered_output_tokens":%d,"retryable":false,"error":{"message":"interrupted","type":"upstream_error","param":null,"code":"upstream_decode_interrupted","request_id":%q,"partial_output":true,"delivered_output_tokens":%d,"retryable":false}}`,
		seq, testID, delivered, testID, delivered)}
}

// responsesFailed is the terminal event of interruptedResponses, whose output is the
// message delivered before it.
func responsesFailed(seq int, id string) ev {
	return responsesFailedWith(seq, id, `[{"id":"i","content":[{"type":"output_text","text":" alpha bravo","annotations":[]}],"role":"assistant","status":"incomplete","type":"message"}]`)
}

func responsesFailedWith(seq int, id, output string) ev {
	return ev{"response.failed", fmt.Sprintf(`{"type":"response.failed","sequence_number":%d,"response":{"id":%q,"object":"response","created_at":1,"status":"failed","model":"sim-model","output":%s,"error":{"code":"upstream_decode_interrupted","message":"interrupted"},"incomplete_details":null}}`, seq, id, output)}
}

// A response.failed whose output is not what was delivered is reported: empty, as if
// nothing had been sent, or holding more than the client received.
func TestCheckerReportsAResponsesFailedOutputThatIsNotWhatWasDelivered(t *testing.T) {
	for _, output := range []string{`[]`,
		`[{"id":"i","content":[{"type":"output_text","text":" alpha bravo charlie","annotations":[]}],"role":"assistant","status":"incomplete","type":"message"}]`} {
		h := interruptedResponses()
		setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1), responsesFailedWith(6, "resp_1", output)})...)
		requireRule(t, h, rShape)
	}
}

// interruptedResponses: one delta of two tokens, then the error event and response.failed.
func interruptedResponses() *history {
	h := apiHistory("responses")
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1), responsesFailed(6, "resp_1")})...)
	h.journal.Outcome, h.journal.DeliveredOutputTokens = "interrupted", 1
	return h
}

func TestCheckerReportsAResponsesStreamCompletedAfterTheError(t *testing.T) {
	h := interruptedResponses()
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1), completedResponses()[7]})...)
	requireRule(t, h, rShape)
	// ... or after response.failed.
	h = interruptedResponses()
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1), responsesFailed(6, "resp_1"),
		responsesEv("response.completed", 7, `"response":{"id":"resp_1","status":"completed","output":[]},`)})...)
	requireRule(t, h, rShape)
	// The error event alone: the SDKs' clients wait for a terminal event.
	h = interruptedResponses()
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1)})...)
	requireRule(t, h, rShape)
}

func TestCheckerReportsAWrongResponsesSequenceNumber(t *testing.T) {
	h := interruptedResponses()
	// The error event must number the event after the last one the client got (5).
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(0, 1), responsesFailed(1, "resp_1")})...)
	requireRule(t, h, rShape)
	h = interruptedResponses()
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1), responsesFailed(5, "resp_1")})...)
	requireRule(t, h, rShape)
	// response.failed of another response than the one the client was told about.
	h = interruptedResponses()
	setNamed(h, events(responsesStart, []ev{responsesDelta(4, " alpha bravo"), responsesError(5, 1), responsesFailed(6, "resp_2")})...)
	requireRule(t, h, rShape)
}

func TestCheckerReportsAResponsesCallIDThatChanges(t *testing.T) {
	h := apiHistory("responses")
	h.req.tools = true
	h.answers["sim-1"] = answer{choices: []refChoice{{toolName: "lookup", toolArgs: `{"city": "red"}`, finish: "tool_calls"}}}
	id := gateway.ResponsesCallID(testID, 0, responsesShapeID)
	stream := func(doneID string) []ev {
		item := func(typ string, seq int, callID, status string) ev {
			return responsesEv(typ, seq, fmt.Sprintf(`"item":{"arguments":"","call_id":%q,"name":"lookup","type":"function_call","id":"fc","status":%q},"output_index":0,`, callID, status))
		}
		return events(responsesStart[:2], []ev{
			item("response.output_item.added", 2, id, "in_progress"),
			responsesEv("response.function_call_arguments.delta", 3, `"delta":"{\"city\": \"red\"}","item_id":"fc","output_index":0,`),
			item("response.output_item.done", 4, doneID, "completed"),
			responsesEv("response.completed", 5, fmt.Sprintf(`"response":{"id":"resp_1","status":"completed","output":[{"type":"function_call","call_id":%q,"name":"lookup","arguments":"{\"city\": \"red\"}"}],"usage":{"output_tokens":6}},`, doneID)),
		})
	}
	h.journal.DeliveredOutputTokens = argumentTokens(`{"city": "red"}`)
	setNamed(h, stream(id)...)
	if got := rules(h); len(got) > 0 {
		t.Fatalf("a call with one derived call_id was reported: %q", got)
	}
	// vLLM's final response names the call chatcmpl-tool-…: the client must see one id.
	setNamed(h, stream("chatcmpl-tool-0123456789abcdef0123456789abcdef")...)
	requireRule(t, h, rToolID)
}

func TestCheckerReportsAnEmbeddingFromAnotherReplica(t *testing.T) {
	h := apiHistory("embeddings")
	h.req.stream, h.req.prompts = false, []string{"one", "two"}
	h.journal.DeliveredOutputTokens = 0
	vec := func(replica, input string) string {
		var b strings.Builder
		for i, x := range sim.Embedding(replica, input, embeddingDim) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, x)
		}
		return "[" + b.String() + "]"
	}
	h.answers["sim-1"] = answer{vectors: [][]float32{sim.Embedding("sim-1", "one", embeddingDim), sim.Embedding("sim-1", "two", embeddingDim)}}
	body := func(second string) []byte {
		return []byte(`{"object":"list","data":[{"index":0,"object":"embedding","embedding":` + vec("sim-1", "one") +
			`},{"index":1,"object":"embedding","embedding":` + second + `}],"usage":{"prompt_tokens":2,"total_tokens":2}}`)
	}
	h.req.seen.raw = body(vec("sim-1", "two"))
	h.req.seen.parse()
	if got := rules(h); len(got) > 0 {
		t.Fatalf("sim-1's own vectors were reported: %q", got)
	}
	h.req.seen.raw = body(vec("sim-2", "two"))
	requireRule(t, h, rSplice)
}

// continuation is a Responses request that continues response resp_prev, which sim-2
// made a second ago, and that ran and completed on sim-2.
func continuation() *history {
	h := apiHistory("responses")
	h.req.continues, h.req.prevID = 0, "resp_prev"
	h.producer, h.producedAt = "sim-2", h.req.seen.sentAt.Add(-time.Second)
	h.answers = map[string]answer{"sim-2": h.answers["sim-1"]}
	h.journal.Attempts[0].Replica = "sim-2"
	h.recordOn = map[string]string{h.records[0].ID: "sim-2"}
	setNamed(h, completedResponses()...)
	return h
}

func TestCheckerReportsAContinuationThatRanOnAnotherReplica(t *testing.T) {
	h := continuation()
	if got := rules(h); len(got) > 0 {
		t.Fatalf("a continuation on its replica was reported: %q", got)
	}
	// The gateway sent it where the response is not: that replica would answer with
	// another conversation's text, or not know the response at all.
	h.journal.Attempts[0].Replica = "sim-1"
	h.recordOn[h.records[0].ID] = "sim-1"
	h.answers["sim-1"] = h.answers["sim-2"]
	requireRule(t, h, rPinned)
}

func TestCheckerReportsAContinuationRefusedWithoutCause(t *testing.T) {
	h := continuation()
	setNamed(h)
	h.req.seen.status = http.StatusServiceUnavailable
	h.req.seen.raw = []byte(`{"error":{"message":"gone","type":"server_error","param":null,"code":"previous_response_unavailable","retryable":false}}`)
	h.journal = journal{ID: testID, Phase: "done", Outcome: "failed"}
	h.records = nil
	// sim-2 was up, not overloaded and reachable.
	requireRule(t, h, rPinned)
	// It had crashed a moment before: the gateway was right to keep it out.
	h.crashes = map[string][]time.Time{"sim-2": {h.req.seen.sentAt.Add(-200 * time.Millisecond)}}
	if got := rules(h); len(got) > 0 {
		t.Errorf("previous_response_unavailable while the replica was down was reported: %q", got)
	}
	// The same error is never retryable: sending it again cannot help.
	h.req.seen.raw = []byte(`{"error":{"message":"gone","type":"server_error","param":null,"code":"previous_response_unavailable","retryable":true}}`)
	requireRule(t, h, rShape)
}

func TestCheckerReportsAContinuationTheReplicaForgotWithoutARestart(t *testing.T) {
	h := continuation()
	setNamed(h)
	h.req.seen.status = http.StatusNotFound
	h.req.seen.raw = []byte(`{"error":{"message":"Response with id 'resp_prev' not found.","type":"invalid_request_error","param":"response_id","code":"not_found"}}`)
	h.journal.Outcome, h.journal.FirstDeltaSent, h.journal.DeliveredOutputTokens = "failed", false, 0
	h.journal.Attempts[0].EndReason, h.journal.Attempts[0].Failure = "engine_status_404", "rejected"
	h.records[0].Outcome = sim.OutcomeError
	requireRule(t, h, rPinned)
	h.crashes = map[string][]time.Time{"sim-2": {h.producedAt.Add(100 * time.Millisecond)}}
	if got := rules(h); len(got) > 0 {
		t.Errorf("a response forgotten in a restart was reported: %q", got)
	}
}

// An engine that reported an error and then held its stream open proved nothing: in
// direct mode no rerun may follow, and the attempt is uncertain.
func TestCheckerReportsARerunAfterAnErrorWithoutEnd(t *testing.T) {
	h := cleanHistory(1)
	t0 := h.journal.Attempts[0].StartedAt
	h.journal.Attempts = []journalAttempt{
		{ID: testID + ".a1", Replica: "sim-2", StartedAt: t0, EndedAt: t0.Add(5 * time.Second), EndReason: "engine_error_event", Failure: "dead", CancelSent: true},
		{ID: testID + ".a2", Replica: "sim-1", StartedAt: t0.Add(5 * time.Second), EndedAt: t0.Add(6 * time.Second), EndReason: "completed"},
	}
	h.records = []sim.Record{
		{ID: "chatcmpl-2", AttemptID: testID + ".a1", RequestID: testID, Outcome: sim.OutcomeErrorHung, Started: t0, Ended: t0.Add(5 * time.Second)},
		{ID: "chatcmpl-1", AttemptID: testID + ".a2", RequestID: testID, Outcome: sim.OutcomeFinished, Started: t0.Add(5 * time.Second), Ended: t0.Add(6 * time.Second)},
	}
	h.answers["sim-2"] = answer{choices: []refChoice{{text: " echo golf hotel india", finish: "length"}}}
	requireRule(t, h, rClass)          // called dead, though the engine never ended its stream
	requireRule(t, h, rUncertainRerun) // and run again without proof
}
