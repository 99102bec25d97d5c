package protocol

import (
	"encoding/json"
	"testing"

	"github.com/fencegate/fencegate/internal/sse"
)

// Events of a Responses stream as vLLM writes them: a reasoning item, a finished
// function call, and a message cut in its second delta.
var deliveredEvents = []string{
	`{"response":{"id":"resp_1","output":[],"status":"in_progress"},"sequence_number":0,"type":"response.created"}`,
	`{"item":{"id":"rs_1","summary":[],"type":"reasoning","content":[],"status":"in_progress"},"output_index":0,"sequence_number":1,"type":"response.output_item.added"}`,
	`{"content_index":0,"delta":"think","item_id":"rs_1","output_index":0,"sequence_number":2,"type":"response.reasoning_text.delta"}`,
	`{"content_index":0,"delta":"ing","item_id":"rs_1","output_index":0,"sequence_number":3,"type":"response.reasoning_text.delta"}`,
	`{"item":{"arguments":"{\"ci","call_id":"call_7","name":"weather","type":"function_call","id":"fc_1","status":"in_progress"},"output_index":1,"sequence_number":4,"type":"response.output_item.added"}`,
	`{"delta":"{\"ci","item_id":"fc_1","output_index":1,"sequence_number":5,"type":"response.function_call_arguments.delta"}`,
	`{"delta":"ty\":\"Oslo\"}","item_id":"fc_1","output_index":1,"sequence_number":6,"type":"response.function_call_arguments.delta"}`,
	`{"item":{"arguments":"{\"city\":\"Oslo\"}","call_id":"call_7","name":"weather","type":"function_call","id":"fc_1","status":"completed"},"output_index":1,"sequence_number":7,"type":"response.output_item.done"}`,
	`{"item":{"id":"msg_1","content":[],"role":"assistant","status":"in_progress","type":"message"},"output_index":2,"sequence_number":8,"type":"response.output_item.added"}`,
	`{"content_index":0,"item_id":"msg_1","output_index":2,"part":{"annotations":[],"text":"","type":"output_text","logprobs":[]},"sequence_number":9,"type":"response.content_part.added"}`,
	`{"content_index":0,"delta":" alpha","item_id":"msg_1","logprobs":[],"output_index":2,"sequence_number":10,"type":"response.output_text.delta"}`,
	`{"content_index":0,"delta":" \"bravo\"","item_id":"msg_1","logprobs":[],"output_index":2,"sequence_number":11,"type":"response.output_text.delta"}`,
	// A delta of an item the client was never told of changes nothing.
	`{"content_index":0,"delta":"lost","item_id":"msg_9","output_index":5,"sequence_number":12,"type":"response.output_text.delta"}`,
}

// response.failed's output is what the events before it delivered: finished items as
// they were, unfinished ones with their deltas and status incomplete.
func TestResponsesFailedOutputHoldsWhatWasDelivered(t *testing.T) {
	var st Stream
	for _, ev := range deliveredEvents {
		st.Output.Add([]byte(ev))
	}
	st.ResponseID, st.NextSequence = "resp_1", 13
	evs := events(t, Interruption(sse.Responses, interrupted(), st))
	var failed struct {
		Response struct {
			Output []json.RawMessage `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(evs[1][1]), &failed); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"id":"rs_1","summary":[],"type":"reasoning","content":[{"type":"reasoning_text","text":"thinking"}],"status":"incomplete"}`,
		`{"arguments":"{\"city\":\"Oslo\"}","call_id":"call_7","name":"weather","type":"function_call","id":"fc_1","status":"completed"}`,
		`{"id":"msg_1","content":[{"type":"output_text","text":" alpha \"bravo\"","annotations":[]}],"role":"assistant","status":"incomplete","type":"message"}`,
	}
	if len(failed.Response.Output) != len(want) {
		t.Fatalf("output %s", evs[1][1])
	}
	for i, w := range want {
		if got := string(failed.Response.Output[i]); got != w {
			t.Errorf("output[%d]\n got %s\nwant %s", i, got, w)
		}
	}
}

// An unfinished function call carries the arguments delivered so far; nothing delivered
// is an empty output.
func TestResponsesFailedOutputUnfinishedCall(t *testing.T) {
	var o ResponsesOutput
	if got := string(o.AppendJSON(nil)); got != "[]" {
		t.Fatalf("nothing delivered: %s", got)
	}
	for _, ev := range deliveredEvents[4:6] {
		o.Add([]byte(ev))
	}
	want := `[{"arguments":"{\"ci","call_id":"call_7","name":"weather","type":"function_call","id":"fc_1","status":"incomplete"}]`
	if got := string(o.AppendJSON(nil)); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// BenchmarkResponsesOutputAdd is the cost, per text delta, of keeping what a Responses
// client received for response.failed: on the token path of every Responses stream.
func BenchmarkResponsesOutputAdd(b *testing.B) {
	var o ResponsesOutput
	for _, ev := range deliveredEvents[8:10] {
		o.Add([]byte(ev))
	}
	delta := []byte(deliveredEvents[10])
	b.ReportAllocs()
	for b.Loop() {
		o.Add(delta)
	}
}
