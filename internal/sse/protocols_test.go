package sse

import (
	"encoding/json"
	"strings"
	"testing"
)

// Events as the Anthropic Messages API streams them.
const (
	msgStart      = `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`
	msgPing       = `{"type": "ping"}`
	msgBlockText  = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	msgBlockThink = `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`
	msgBlockTool  = `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{}}}`
	msgTextDelta  = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`
	msgThinkDelta = `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}`
	msgJSONDelta  = `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`
	msgEmptyJSON  = `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`
	msgBlockStop  = `{"type":"content_block_stop","index":0}`
	msgDelta      = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`
	msgStop       = `{"type":"message_stop"}`
	msgError      = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
)

func TestSummarizeMessages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		class   Class
		outputs int
		tokens  int
	}{
		{"message_start is not output", msgStart, 0, 0, -1},
		{"ping is a keepalive", msgPing, Comment, 0, -1},
		{"an empty text block is not output", msgBlockText, 0, 0, -1},
		{"an empty thinking block is not output", msgBlockThink, 0, 0, -1},
		{"a tool_use block reveals the call", msgBlockTool, Output | ToolCalls, 0, -1},
		{"text delta", msgTextDelta, Output, 1, -1},
		{"thinking delta", msgThinkDelta, Output, 1, -1},
		{"tool input delta", msgJSONDelta, Output, 1, -1},
		{"an empty tool input delta", msgEmptyJSON, 0, 0, -1},
		{"content_block_stop", msgBlockStop, 0, 0, -1},
		{"message_delta with a stop reason", msgDelta, Finish | Usage, 0, 15},
		{"message_stop ends the stream", msgStop, Done, 0, -1},
		{"error", msgError, Error, 0, -1},
		{"type after the delta", `{"delta":{"type":"text_delta","text":"x"},"index":0,"type":"content_block_delta"}`, Output, 1, -1},
		{"escaped type", `{"type":"content_block_\u0064elta","delta":{"text":"x"}}`, Output, 1, -1},
		{"malformed", `{"type":"content_block_delta","delta":{"text":"x"}`, Malformed, 0, -1},
	} {
		sum := SummarizeEvent(Messages, nil, []byte(tc.data))
		if sum.Class != tc.class || sum.Outputs != tc.outputs || sum.CompletionTokens != tc.tokens {
			t.Errorf("%s: %+v, want class %v outputs %d tokens %d", tc.name, sum, tc.class, tc.outputs, tc.tokens)
		}
	}
	if sum := SummarizeEvent(Messages, nil, []byte(msgDelta)); sum.Finished != 1 {
		t.Errorf("message_delta finishes the (only) choice: %+v", sum)
	}
	// Without a type member, the event name decides.
	if sum := SummarizeEvent(Messages, []byte("message_stop"), []byte(`{}`)); sum.Class != Done {
		t.Errorf("event name: %+v", sum)
	}
}

// Events as the OpenAI Responses API streams them.
const (
	respCreated    = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`
	respInProgress = `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`
	respItemMsg    = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`
	respPartAdded  = `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`
	respTextDelta  = `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}`
	respTextDone   = `{"type":"response.output_text.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hi"}`
	respItemFunc   = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`
	respArgsDelta  = `{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{\"ci"}`
	respReasoning  = `{"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"hmm"}`
	respCompleted  = `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}}`
	respCompletedF = `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","output":[{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}],"usage":{"input_tokens":5,"output_tokens":3}}}`
	respIncomplete = `{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"output_tokens":16}}}`
	respFailed     = `{"type":"response.failed","sequence_number":6,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"boom"}}}`
	respError      = `{"type":"error","sequence_number":6,"code":"server_error","message":"boom","param":null}`
)

// Events of calls of tools the engine runs itself, as vLLM's streaming_events.py emits them
// (openai-python's models dumped with their nulls; code_interpreter_call is a TypedDict).
const (
	respItemMCP      = `{"item":{"id":"mcp_1","arguments":"","name":"create_ticket","server_label":"tickets","type":"mcp_call","approval_request_id":null,"error":null,"output":null,"status":"in_progress"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}`
	respMCPProgress  = `{"item_id":"mcp_1","output_index":0,"sequence_number":3,"type":"response.mcp_call.in_progress"}`
	respMCPArgsEmpty = `{"delta":"","item_id":"mcp_1","output_index":0,"sequence_number":4,"type":"response.mcp_call_arguments.delta"}`
	respMCPDone      = `{"item_id":"mcp_1","output_index":0,"sequence_number":6,"type":"response.mcp_call.completed"}`
	respItemCode     = `{"item":{"type":"code_interpreter_call","id":"tool_1","code":null,"container_id":"auto","outputs":null,"status":"in_progress"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}`
	respCodeProgress = `{"item_id":"tool_1","output_index":0,"sequence_number":3,"type":"response.code_interpreter_call.in_progress"}`
	respItemSearch   = `{"item":{"id":"tool_2","action":{"query":"fencegate","type":"search","sources":null},"status":"in_progress","type":"web_search_call"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}`
	respSearching    = `{"item_id":"tool_2","output_index":0,"sequence_number":4,"type":"response.web_search_call.searching"}`
)

func TestSummarizeResponses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		class   Class
		outputs int
		tokens  int
		seq     int64
	}{
		{"created", respCreated, 0, 0, -1, 0},
		{"in progress", respInProgress, 0, 0, -1, 1},
		{"an empty message item", respItemMsg, 0, 0, -1, 2},
		{"an empty content part", respPartAdded, 0, 0, -1, 3},
		{"text delta", respTextDelta, Output, 1, -1, 4},
		{"text done", respTextDone, Output, 0, -1, 5},
		{"a function_call item reveals the call", respItemFunc, Output | ToolCalls, 0, -1, 2},
		{"arguments delta", respArgsDelta, Output, 1, -1, 3},
		{"reasoning delta", respReasoning, Output, 1, -1, 3},
		{"completed", respCompleted, Finish | Done | Usage, 0, 7, 9},
		{"completed with a function call", respCompletedF, Finish | Done | Usage | Output | ToolCalls, 0, 3, 9},
		{"incomplete", respIncomplete, Finish | Done | Usage, 0, 16, 9},
		{"an mcp_call item announces an engine-run call", respItemMCP, Output, 0, -1, 2},
		{"mcp_call in progress", respMCPProgress, Output, 0, -1, 3},
		{"an empty mcp arguments delta", respMCPArgsEmpty, Output, 0, -1, 4},
		{"mcp_call completed", respMCPDone, Output, 0, -1, 6},
		{"a code_interpreter_call item", respItemCode, Output, 0, -1, 2},
		{"code_interpreter_call in progress", respCodeProgress, Output, 0, -1, 3},
		{"a web_search_call item", respItemSearch, Output, 0, -1, 2},
		{"web_search_call searching", respSearching, Output, 0, -1, 4},
		{"failed", respFailed, Error, 0, -1, 6},
		{"error", respError, Error, 0, -1, 6},
		{"malformed", `{"type":"response.output_text.delta","delta":"x"`, Malformed, 0, -1, -1},
	} {
		sum := SummarizeEvent(Responses, nil, []byte(tc.data))
		if sum.Class != tc.class || sum.Outputs != tc.outputs || sum.CompletionTokens != tc.tokens || sum.Sequence != tc.seq {
			t.Errorf("%s: %+v, want class %v outputs %d tokens %d seq %d", tc.name, sum, tc.class, tc.outputs, tc.tokens, tc.seq)
		}
	}
}

func TestProtocolSummariesDoNotAllocate(t *testing.T) {
	var msgs, resps [][]byte
	for _, m := range []string{msgStart, msgBlockTool, msgTextDelta, msgDelta, msgStop, `{"type":"content_block_\u0064elta","delta":{"text":"x"}}`} {
		msgs = append(msgs, []byte(m))
	}
	for _, r := range []string{respCreated, respTextDelta, respItemFunc, respCompleted, respCompletedF, respItemMCP, respMCPProgress, respItemCode} {
		resps = append(resps, []byte(r))
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, m := range msgs {
			SummarizeEvent(Messages, nil, m)
		}
		for _, r := range resps {
			SummarizeEvent(Responses, nil, r)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per run", allocs)
	}
}

// The decoder summarizes under its protocol, with the event name as a fallback.
func TestDecoderProtocol(t *testing.T) {
	d := Decoder{Protocol: Messages}
	d.Append([]byte("event: message_start\ndata: " + msgStart + "\n\nevent: content_block_delta\ndata: " + msgTextDelta + "\n\n"))
	first, _ := d.Next()
	second, _ := d.Next()
	if first.Class != 0 || second.Class != Output || string(second.Name) != "content_block_delta" {
		t.Fatalf("events %+v / %+v", first, second)
	}
}

// FuzzSummarizeProtocols checks the protocol summaries against a decoding reference.
func FuzzSummarizeProtocols(f *testing.F) {
	for _, s := range []string{msgStart, msgBlockTool, msgTextDelta, msgDelta, msgStop, msgPing, respCreated, respTextDelta, respItemFunc, respCompleted, respCompletedF, respFailed, respItemMCP, respMCPProgress, respItemSearch} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, p := range []Protocol{Messages, Responses} {
			sum := SummarizeEvent(p, nil, []byte(data))
			var v map[string]any
			valid := json.Valid([]byte(data))
			if !valid {
				if sum.Class != Malformed {
					t.Fatalf("%v: invalid JSON %q summarized %+v", p, data, sum)
				}
				continue
			}
			if json.Unmarshal([]byte(data), &v) != nil {
				continue // valid JSON that is not an object
			}
			typ, _ := v["type"].(string)
			if p == Messages && typ == "message_stop" && sum.Class != Done {
				t.Fatalf("message_stop %q: %+v", data, sum)
			}
			if p == Responses && (typ == "response.completed" || typ == "response.incomplete") && sum.Class&(Finish|Done) != Finish|Done {
				t.Fatalf("terminal %q: %+v", data, sum)
			}
			if p == Responses && strings.HasSuffix(typ, ".delta") {
				d, _ := v["delta"].(string)
				if (d != "") != (sum.Class&Output != 0 && sum.Outputs == 1) && v["item"] == nil && v["text"] == nil && v["arguments"] == nil && v["response"] == nil && v["part"] == nil {
					t.Fatalf("delta %q: %+v", data, sum)
				}
			}
		}
	})
}
