package sim

import (
	"encoding/json"
	"strconv"
)

// streamEncoder renders one request's SSE events in vLLM's exact shapes.
// It appends to a reused buffer from pre-encoded pieces, so a token costs
// no JSON encoding and no allocation.
type streamEncoder struct {
	chat       bool
	continuous bool   // stream_options.continuous_usage_stats: usage in every choice chunk
	head       []byte // `data: {"id":"…","object":"…","created":N,"model":"…"`
	buf        []byte
}

// chunkUsage is the usage a choice chunk carries with continuous usage
// stats, as vLLM computes it for that chunk: the choice's prompt, and the
// tokens that choice has produced so far, this chunk's included.
type chunkUsage struct{ prompt, completion int }

func newStreamEncoder(endpoint, id string, created int64, model string, continuous bool) *streamEncoder {
	e := &streamEncoder{chat: endpoint == endpointChat, continuous: continuous}
	object := "text_completion"
	if e.chat {
		object = "chat.completion.chunk"
	}
	idJSON, _ := json.Marshal(id) // strings always encode
	modelJSON, _ := json.Marshal(model)
	e.head = append(e.head, `data: {"id":`...)
	e.head = append(e.head, idJSON...)
	e.head = append(e.head, `,"object":"`+object+`","created":`...)
	e.head = strconv.AppendInt(e.head, created, 10)
	e.head = append(e.head, `,"model":`...)
	e.head = append(e.head, modelJSON...)
	e.buf = make([]byte, 0, 512)
	return e
}

// reset starts a new batch of events in the buffer.
func (e *streamEncoder) reset() { e.buf = e.buf[:0] }

// bytes returns the events appended since reset.
func (e *streamEncoder) bytes() []byte { return e.buf }

// choiceHead appends the chunk head and opens its one choice.
func (e *streamEncoder) choiceHead(choice int) {
	e.buf = append(e.buf, e.head...)
	e.buf = append(e.buf, `,"choices":[{"index":`...)
	e.buf = strconv.AppendInt(e.buf, int64(choice), 10)
}

// closeChoice closes a choice chunk's choices array and the chunk, with
// the chunk's usage when continuous usage stats are on. vLLM puts usage
// after the choices, with the three counts in its UsageInfo field order.
func (e *streamEncoder) closeChoice(u chunkUsage) {
	e.buf = append(e.buf, ']')
	if e.continuous {
		e.usageObject(u.prompt, u.completion)
	}
	e.buf = append(e.buf, "}\n\n"...)
}

func (e *streamEncoder) usageObject(prompt, completion int) {
	e.buf = append(e.buf, `,"usage":{"prompt_tokens":`...)
	e.buf = strconv.AppendInt(e.buf, int64(prompt), 10)
	e.buf = append(e.buf, `,"total_tokens":`...)
	e.buf = strconv.AppendInt(e.buf, int64(prompt+completion), 10)
	e.buf = append(e.buf, `,"completion_tokens":`...)
	e.buf = strconv.AppendInt(e.buf, int64(completion), 10)
	e.buf = append(e.buf, '}')
}

// role appends a chat stream's first chunk for one choice: the assistant
// role with empty content (and, with continuous usage, the prompt and no
// completion tokens). vLLM sends one per choice, all before any content.
// Text completions have none.
func (e *streamEncoder) role(choice int, u chunkUsage) {
	if !e.chat {
		return
	}
	e.choiceHead(choice)
	e.buf = append(e.buf, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
	e.closeChoice(u)
}

// text appends the chunk carrying one choice's next piece of output; text
// is already JSON-escaped, without its quotes.
func (e *streamEncoder) text(choice int, text []byte, u chunkUsage) {
	e.choiceHead(choice)
	if e.chat {
		e.buf = append(e.buf, `,"delta":{"content":"`...)
		e.buf = append(e.buf, text...)
		e.buf = append(e.buf, `"},"logprobs":null,"finish_reason":null}`...)
	} else {
		e.buf = append(e.buf, `,"text":"`...)
		e.buf = append(e.buf, text...)
		e.buf = append(e.buf, `","logprobs":null,"finish_reason":null,"stop_reason":null}`...)
	}
	e.closeChoice(u)
}

// toolStart appends the first chunk of a choice's tool call: its id, type,
// index and function name, and the first arguments text.
func (e *streamEncoder) toolStart(choice int, call *toolCall, args []byte, u chunkUsage) {
	e.choiceHead(choice)
	e.buf = append(e.buf, `,"delta":{"tool_calls":[{"id":`...)
	e.buf = appendJSONString(e.buf, call.id)
	e.buf = append(e.buf, `,"type":"function","index":`...)
	e.buf = strconv.AppendInt(e.buf, int64(call.index), 10)
	e.buf = append(e.buf, `,"function":{"name":`...)
	e.buf = appendJSONString(e.buf, call.name)
	e.buf = append(e.buf, `,"arguments":"`...)
	e.buf = append(e.buf, args...)
	e.buf = append(e.buf, `"}}]},"logprobs":null,"finish_reason":null}`...)
	e.closeChoice(u)
}

// toolArgs appends a later chunk of a choice's tool call: its index and
// more arguments text. vLLM's "required" mode also sends "name": null.
func (e *streamEncoder) toolArgs(choice int, call *toolCall, args []byte, nullName bool, u chunkUsage) {
	e.choiceHead(choice)
	e.buf = append(e.buf, `,"delta":{"tool_calls":[{"index":`...)
	e.buf = strconv.AppendInt(e.buf, int64(call.index), 10)
	e.buf = append(e.buf, `,"function":{`...)
	if nullName {
		e.buf = append(e.buf, `"name":null,`...)
	}
	e.buf = append(e.buf, `"arguments":"`...)
	e.buf = append(e.buf, args...)
	e.buf = append(e.buf, `"}}]},"logprobs":null,"finish_reason":null}`...)
	e.closeChoice(u)
}

func appendJSONString(b []byte, s string) []byte {
	j, _ := json.Marshal(s) // strings always encode
	return append(b, j...)
}

// finish appends the chunk with one choice's finish reason and an empty
// delta.
func (e *streamEncoder) finish(choice int, reason string, u chunkUsage) {
	e.choiceHead(choice)
	if e.chat {
		e.buf = append(e.buf, `,"delta":{},"logprobs":null,"finish_reason":"`...)
	} else {
		e.buf = append(e.buf, `,"text":"","logprobs":null,"finish_reason":"`...)
	}
	e.buf = append(e.buf, reason...)
	e.buf = append(e.buf, `","stop_reason":null}`...)
	e.closeChoice(u)
}

// usage appends the usage chunk sent when stream_options.include_usage is
// set: no choices, only the token counts summed over all choices.
func (e *streamEncoder) usage(prompt, completion int) {
	e.buf = append(e.buf, e.head...)
	e.buf = append(e.buf, `,"choices":[]`...)
	e.usageObject(prompt, completion)
	e.buf = append(e.buf, "}\n\n"...)
}

// done appends the stream terminator.
func (e *streamEncoder) done() { e.buf = append(e.buf, "data: [DONE]\n\n"...) }

// errorEvent appends a mid-stream error event with the given JSON body.
func (e *streamEncoder) errorEvent(body []byte) {
	e.buf = append(e.buf, "data: "...)
	e.buf = append(e.buf, body...)
	e.buf = append(e.buf, "\n\n"...)
}
