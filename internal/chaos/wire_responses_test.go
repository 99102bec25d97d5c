package chaos

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/trace"
)

// The wire judge on crafted Responses histories: what the client received on
// /v1/responses, streamed or whole, and how often the tool server was called.
func TestWireJudgeResponses(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	created := ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)
	mcpAdded := ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"mcp_call","id":"mcp_1","name":"tickets.create_ticket","server_label":"tickets","arguments":"","status":"in_progress"}}`)
	mcpDelta := ev("response.mcp_call_arguments.delta", `{"type":"response.mcp_call_arguments.delta","sequence_number":2,"output_index":0,"item_id":"mcp_1","delta":"{\"title\": \"x\"}"}`)
	text := func(seq, d string) string {
		return ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":`+seq+`,"output_index":1,"content_index":0,"item_id":"msg_1","delta":"`+d+`"}`)
	}
	incomplete := ev("response.incomplete", `{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"incomplete","output":[]}}`)
	interruption := func(retryable string) string {
		return ev("error", `{"type":"error","code":"upstream_failed_after_tool_use","message":"a tool may have run","param":null,"sequence_number":5,"error":{"message":"a tool may have run","type":"upstream_error","code":"upstream_failed_after_tool_use","partial_output":true,"retryable":`+retryable+`}}`) +
			ev("response.failed", `{"type":"response.failed","sequence_number":6,"response":{"id":"resp_1","object":"response","status":"failed","output":[],"error":{"code":"upstream_failed_after_tool_use","message":"a tool may have run"}}}`)
	}
	wholeAnswer := `{"id":"resp_1","object":"response","status":"incomplete","error":null,"output":[` +
		`{"id":"mcp_1","type":"mcp_call","name":"tickets.create_ticket","server_label":"tickets","arguments":"{\"title\": \"x\"}","status":"completed"},` +
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":" alpha beta"}]}]}`
	answers := map[string]answer{
		"sim-1": {choices: []refChoice{{text: " alpha beta", finish: "length"}}},
		"sim-2": {choices: []refChoice{{text: " gamma delta", finish: "length"}}},
	}
	calls := func(n int) []string {
		var c []string
		for i := range n {
			c = append(c, "create_ticket by sim-"+string(rune('1'+i)))
		}
		return c
	}
	for _, tc := range []struct {
		name       string
		status     int
		whole      bool
		body       []string
		transport  error
		engineTool bool
		toolCalls  int
		ending     string
		rules      []string
	}{
		{"a whole stream", 200, false, []string{created, mcpAdded, mcpDelta, text("3", " alpha"), text("4", " beta"), incomplete}, nil, true, 1, endComplete, nil},
		{"the tool's announcement, then a cut", 200, false, []string{created, mcpAdded, mcpDelta}, io.ErrUnexpectedEOF, true, 1, "", []string{vSilentEnd}},
		{"the tool's announcement, then the interruption", 200, false, []string{created, mcpAdded, mcpDelta, interruption("false")}, nil, true, 1, endInterrupted, nil},
		{"an interruption that may be retried", 200, false, []string{created, mcpAdded, interruption("true")}, nil, true, 1, endInterrupted, []string{vToolError}},
		{"the tool run twice", 200, false, []string{created, mcpAdded, text("3", " gamma"), text("4", " delta"), incomplete}, nil, true, 2, endComplete, []string{vToolTwice}},
		{"a tool run for a request that declared none", 200, false, []string{created, text("1", " alpha"), text("2", " beta"), incomplete}, nil, false, 1, endComplete, []string{vToolTwice}},
		{"two replicas' text", 200, false, []string{created, mcpAdded, text("3", " alpha"), text("4", " delta"), incomplete}, nil, true, 1, endComplete, []string{vSplice}},
		{"output after the interruption", 200, false, []string{created, mcpAdded, interruption("false"), text("7", " alpha")}, nil, true, 1, endInterrupted, []string{vAfterEnd}},
		{"a whole answer, its tool call not text", 200, true, []string{wholeAnswer}, nil, true, 1, endComplete, nil},
		{"a whole answer short of the text", 200, true, []string{strings.Replace(wholeAnswer, " alpha beta", " alpha", 1)}, nil, true, 1, endComplete, []string{vSilentEnd}},
		{"the error of a whole answer", 502, true, []string{`{"error":{"message":"a tool may have run","type":"upstream_error","code":"upstream_failed_after_tool_use","partial_output":false,"retryable":false}}`}, nil, true, 1, endError, nil},
		{"a whole answer's error that hides the tool", 502, true, []string{`{"error":{"message":"bad gateway","type":"upstream_error","code":"bad_gateway"}}`}, nil, true, 1, endError, []string{vToolError}},
		{"an error before the tool ran", 503, true, []string{`{"error":{"message":"busy","type":"overloaded","code":"overloaded"}}`}, nil, true, 0, endError, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctype := "text/event-stream"
			if tc.whole || tc.status != http.StatusOK {
				ctype = "application/json"
			}
			var chunks []trace.Chunk
			for _, b := range tc.body {
				for i := eventEnd([]byte(b)); i > 0 && !tc.whole; i = eventEnd([]byte(b)) {
					chunks, b = append(chunks, trace.Chunk{Text: b[:i]}), b[i:]
				}
				if b != "" {
					chunks = append(chunks, trace.Chunk{Text: b})
				}
			}
			now := time.Now()
			h := &wireHistory{path: "/v1/responses", status: tc.status, contentType: ctype,
				received:  trace.Received{Status: tc.status, ContentType: ctype, Chunks: chunks},
				transport: tc.transport, sentAt: now, endedAt: now, checkedAt: now, answers: answers,
				engineTool: tc.engineTool, toolCalls: calls(tc.toolCalls)}
			v := judgeWire(h)
			var rules []string
			for _, x := range v.violations {
				rules = append(rules, x.rule)
			}
			if !slices.Equal(rules, tc.rules) {
				t.Errorf("violations %v, want %v", v.violations, tc.rules)
			}
			if tc.ending != "" && v.ending != tc.ending {
				t.Errorf("ending %q, want %q", v.ending, tc.ending)
			}
		})
	}
	// Each event as the gateway classifies it: the tool's announcement is output, its
	// arguments are not text, the end finishes the answer in chat's words.
	for _, c := range []struct {
		raw                string
		output, end, isErr bool
		text               string
	}{
		{created, false, false, false, ""},
		{mcpAdded, true, false, false, ""},
		{mcpDelta, true, false, false, ""},
		{text("3", " alpha"), true, false, false, " alpha"},
		{incomplete, true, true, false, ""},
		{strings.SplitAfter(interruption("false"), "\n\n")[0], false, false, true, ""},
		{strings.SplitAfter(interruption("false"), "\n\n")[1], false, false, true, ""},
		{": keepalive\n\n", false, false, false, ""},
	} {
		got := readResponsesWireEvent(c.raw)
		if got.output != c.output || got.end != c.end || got.err != c.isErr || got.text[0] != c.text {
			t.Errorf("%.80q: output %v end %v err %v text %q, want %v %v %v %q", c.raw, got.output, got.end, got.err, got.text[0], c.output, c.end, c.isErr, c.text)
		}
		if c.end && got.finish[0] != "length" {
			t.Errorf("%.80q: finish %q, want length", c.raw, got.finish[0])
		}
	}
}
