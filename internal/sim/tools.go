package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Tool calls. When a chat request has tools and tool_choice is "required"
// or names a function, every choice answers with one call, as vLLM does for
// a forced tool choice: a model constrained to emit the call's JSON. The
// call's arguments are a small JSON object generated from the function's
// parameter schema, deterministic per (replica, prompt, seed, choice) like
// any output text; its id is random per request, as real engines make it.
//
// vLLM's shapes (vllm/entrypoints/openai/chat_completion/serving.py,
// OpenAIServingChat):
//   - Stream (chat_completion_stream_generator): the first delta of a
//     choice carries the call's id, type "function", its index and
//     function name and the first arguments text; later deltas carry only
//     index and arguments. For a named choice the call's index is the
//     choice's index; for "required" it is the call's place in the list
//     (0), and later deltas say "name": null
//     (extract_tool_call_required_streaming).
//   - finish_reason: "tool_calls" for "required", the engine's reason
//     ("stop", or "length" when max_tokens cut it) for a named choice; a
//     whole reply says "tool_calls" for "required" only when the call
//     finished ("stop"). Content is "" beside the calls.
//   - ids: "chatcmpl-tool-" and 32 hex digits (make_tool_call_id, a uuid4),
//     or 9 letters and digits for Mistral models
//     (MistralToolCall.generate_random_id); Config.ToolCallIDStyle picks.
//
// The sim streams the arguments as the model's tokens; a model in
// "required" mode also spends tokens on the JSON around them ([{"name":
// ..., "parameters": ...}]) that vLLM does not stream and the sim does not
// count. ignore_eos has no effect on a call: its JSON ends where it ends.

// Values of Config.ToolCallIDStyle.
const (
	ToolCallIDsVLLM    = "vllm"    // "chatcmpl-tool-" + 32 hex digits
	ToolCallIDsMistral = "mistral" // 9 letters and digits
)

// toolParam is one entry of a request's tools.
type toolParam struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// toolMode is how a request's choices use its tools.
type toolMode int

const (
	toolsNone     toolMode = iota // answer in text (no tools, "none", or "auto")
	toolsRequired                 // tool_choice "required": call one of the tools
	toolsNamed                    // tool_choice names the function to call
)

// toolChoice is a validated tools and tool_choice pair.
type toolChoice struct {
	mode  toolMode
	tools []toolParam
	named int // index in tools of the named function
}

// parseToolChoice validates tools and tool_choice as vLLM's
// ChatCompletionRequest.check_tool_usage does. "auto" (the default when
// tools are given) is answered in text, as a server with
// --enable-auto-tool-choice answers when its model calls nothing.
func parseToolChoice(tools []toolParam, raw json.RawMessage) (toolChoice, *apiError) {
	bad := func(format string, args ...any) (toolChoice, *apiError) {
		return toolChoice{}, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), param: "tool_choice"}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{}, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		switch {
		case name == "none":
			return toolChoice{}, nil
		case tools == nil:
			return bad("When using `tool_choice`, `tools` must be set.")
		case name == "auto":
			return toolChoice{}, nil
		case name != "required":
			return bad("Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", name)
		case len(tools) == 0:
			return toolChoice{}, nil // vLLM: "required" with no tools behaves as "none"
		}
		return toolChoice{mode: toolsRequired, tools: tools}, nil
	}
	const usage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"
	var named struct {
		Function *struct {
			Name *string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return bad("Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", raw)
	}
	switch {
	case tools == nil:
		return bad("When using `tool_choice`, `tools` must be set.")
	case named.Function == nil:
		return bad("Invalid value for `function`: `None` in `tool_choice`! %s", usage)
	case named.Function.Name == nil:
		return bad("Expected field `name` in `function` in `tool_choice`! %s", usage)
	case *named.Function.Name == "":
		return bad("Invalid `name` in `function`: `` in `tool_choice`! %s", usage)
	}
	for i, t := range tools {
		if t.Function.Name == *named.Function.Name {
			return toolChoice{mode: toolsNamed, tools: tools, named: i}, nil
		}
	}
	return bad("The tool specified in `tool_choice` does not match any of the specified `tools`")
}

// toolCall is the one call a tool-calling sequence makes.
type toolCall struct {
	id        string
	name      string
	index     int      // its "index" in stream deltas
	arguments string   // the whole arguments JSON
	raw       []string // arguments cut into tokens
	pieces    [][]byte // the same tokens, each JSON-escaped without quotes
}

// rawPiece is the text of the call's token i.
func (c *toolCall) rawPiece(i int) string { return c.raw[i] }

// newToolCall builds choice's call. The function and the arguments come
// from gen; the id from the request's random source.
func newToolCall(tc *toolChoice, gen generator, choice int, id string) *toolCall {
	fn := tc.named
	if tc.mode == toolsRequired {
		fn = int(mix64(gen.key^0x5bd1e9955bd1e995) % uint64(len(tc.tools)))
	}
	tool := tc.tools[fn]
	call := &toolCall{id: id, name: tool.Function.Name, arguments: toolArguments(tool.Function.Parameters, gen)}
	if tc.mode == toolsNamed {
		call.index = choice // vLLM indexes a named call by its choice
	}
	call.raw = argumentPieces(call.arguments)
	for _, p := range call.raw {
		escaped, _ := json.Marshal(p) // strings always encode
		call.pieces = append(call.pieces, escaped[1:len(escaped)-1])
	}
	return call
}

// toolArguments renders the arguments object for a function's parameter
// schema: one value per declared property, in sorted order, typed as the
// schema types it (a string of two words otherwise), with the spacing
// Python's json.dumps gives (vLLM dumps "required" calls' parameters so).
func toolArguments(schema json.RawMessage, gen generator) string {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s) // a schema the sim cannot read has no properties
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var b []byte
	b = append(b, '{')
	for i, n := range names {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPyString(b, n)
		b = append(b, ": "...)
		r := mix64(gen.key + uint64(i+1)*0x2545f4914f6cdd1d)
		switch s.Properties[n].Type {
		case "integer", "number":
			b = strconv.AppendUint(b, r%100, 10)
		case "boolean":
			b = strconv.AppendBool(b, r%2 == 0)
		default:
			words := vocabulary[r%uint64(len(vocabulary))] + vocabulary[(r>>8)%uint64(len(vocabulary))]
			b = appendPyString(b, strings.TrimPrefix(words, " "))
		}
	}
	return string(append(b, '}'))
}

// argumentPieces cuts JSON text into tokens as a BPE tokenizer roughly
// would: a run of letters and digits, or a run of other characters, each
// with the spaces before it.
func argumentPieces(s string) []string {
	kind := func(r rune) int {
		switch {
		case unicode.IsSpace(r):
			return 0
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			return 1
		}
		return 2
	}
	var pieces []string
	var cur strings.Builder
	curKind := 0 // kind of cur's run after its leading spaces; 0 while it has none
	flush := func() {
		if cur.Len() > 0 {
			pieces = append(pieces, cur.String())
			cur.Reset()
		}
		curKind = 0
	}
	for _, r := range s {
		k := kind(r)
		if (k == 0 && curKind != 0) || (k != 0 && curKind != 0 && k != curKind) {
			flush()
		}
		cur.WriteRune(r)
		if k != 0 {
			curKind = k
		}
	}
	flush()
	return pieces
}

// newToolCallID returns a fresh call id in style.
func newToolCallID(style string) string {
	if style == ToolCallIDsMistral {
		const alphanumeric = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := make([]byte, 9)
		for i := range b {
			b[i] = alphanumeric[rand.IntN(len(alphanumeric))]
		}
		return string(b)
	}
	// uuid.uuid4().hex: version 4, RFC 4122 variant.
	hi, lo := rand.Uint64(), rand.Uint64()
	hi = hi&^0xf000 | 0x4000
	lo = lo&^(0xc<<60) | 0x8<<60
	return fmt.Sprintf("chatcmpl-tool-%016x%016x", hi, lo)
}
