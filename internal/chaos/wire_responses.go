package chaos

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/sse"
)

// The wire judge on the Responses API (/v1/responses), whose requests are the only ones an
// engine runs tools for. What is output, what ends a stream and what is an error is
// internal/sse's classification, the gateway's own (docs/design.md §2 and §5): a delta with
// content, a function_call item, an item or event announcing a call of an engine-run tool
// (mcp_call, …: the engine may act on it), and the terminal response.completed or
// response.incomplete; an `error` event or response.failed is an error. The text the judge
// compares with the replicas' answers is the output_text deltas alone: an engine-run
// call's arguments are the engine's own writing, which no replica's reference answer
// holds, and its announcement is output all the same.

// readResponsesWireEvent reads one event of a Responses stream.
func readResponsesWireEvent(raw string) wireEvent {
	ev := wireEvent{text: map[int]string{}, finish: map[int]string{}}
	ev.name, ev.data = sseFields(raw)
	if ev.data == "" {
		return ev // a comment or keepalive
	}
	sum := sse.SummarizeEvent(sse.Responses, []byte(ev.name), []byte(ev.data))
	if sum.Class&sse.Malformed != 0 {
		return ev
	}
	j := gjson.Parse(ev.data)
	switch {
	case sum.Class&sse.Error != 0:
		ev.err = true
		return ev
	case sum.Class&sse.Done != 0:
		ev.end = true
		ev.finish[0] = responsesFinish(j.Get("response.status").String())
	}
	if j.Get("type").String() == "response.output_text.delta" {
		if d := j.Get("delta").String(); d != "" {
			ev.text[0] = d
		}
	}
	ev.output = sum.Class&(sse.Output|sse.Finish) != 0 || len(ev.text) > 0
	return ev
}

// readResponsesWhole reads a whole Responses answer that is not an error: the text of its
// message items and its status as a finish.
func readResponsesWireWhole(body string, ws *wireStream) {
	j := gjson.Parse(body)
	var text strings.Builder
	j.Get("output").ForEach(func(_, item gjson.Result) bool {
		if item.Get("type").String() == "message" {
			item.Get("content").ForEach(func(_, c gjson.Result) bool {
				if c.Get("type").String() == "output_text" {
					text.WriteString(c.Get("text").String())
				}
				return true
			})
		}
		return true
	})
	ws.text[0] = text.String()
	if status := j.Get("status").String(); status != "" {
		ws.finish[0] = responsesFinish(status)
	}
}

// Rules of the wire judge on tools the engine runs itself (docs/design.md §5).
const (
	// vToolTwice is the random run's rule (rToolTwice): an engine-run tool executed twice
	// for one logical request, read from the tool server's own count.
	vToolTwice = rToolTwice
	// vToolError: the engine ran the tool, and the client then got an error other than a
	// non-retryable upstream_failed_after_tool_use (docs/errors.md): one that does not
	// tell it that a tool may have run and that sending the request again may run it
	// again.
	vToolError = "tool-error"
)

// judgeWireTools checks a history against the tool server's calls: at most one for a
// request that declared an engine-run tool, none for one that declared none; and once the
// tool ran, an error the client got says so, and says not to retry.
func judgeWireTools(h *wireHistory, ws *wireStream, fail failFunc) {
	n := len(h.toolCalls)
	switch {
	case n > 0 && !h.engineTool:
		fail(vToolTwice, "the engines ran a tool for a request that declared none: %s", strings.Join(h.toolCalls, ", "))
	case n > 1:
		fail(vToolTwice, "the engine-run tool ran %d times for this request (%s): a rerun acted again", n, strings.Join(h.toolCalls, ", "))
	}
	if n == 0 || !h.engineTool || h.left || ws.ending != "error" {
		return
	}
	code, retryable := errorCodeOf(ws.errorBody)
	if code != engineActedCode || retryable != "false" {
		fail(vToolError, "the engine ran the tool, then the client got an error %q (retryable %s), not a non-retryable %s: %.200q",
			code, retryable, engineActedCode, ws.errorBody)
	}
}

// errorCodeOf reads the code and the retryable flag ("true", "false", or "absent") of an
// error body or event: an error object's, else the event's own members, else a failed
// response's error.
func errorCodeOf(body []byte) (code, retryable string) {
	j := gjson.ParseBytes(body)
	code, retryable = j.Get("error.code").String(), "absent"
	if code == "" {
		code = j.Get("code").String()
	}
	if code == "" {
		code = j.Get("response.error.code").String()
	}
	for _, path := range []string{"error.retryable", "retryable"} {
		if r := j.Get(path); r.IsBool() {
			return code, fmt.Sprint(r.Bool())
		}
	}
	return code, retryable
}

// toolCallsOn names each call of the tool server by the engine request that made it (vLLM
// names a tool session by its request id), or by its session when no record of the case
// has that id.
func toolCallsOn(calls []sim.ToolCall, recs []replicaRecord) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		name := "session " + c.Session
		for _, r := range recs {
			if r.ID == c.Session {
				name = r.Replica + " " + r.ID
			}
		}
		out = append(out, fmt.Sprintf("%s by %s", c.Tool, name))
	}
	return out
}
