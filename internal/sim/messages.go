package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The Anthropic Messages API as vLLM serves it (vllm/entrypoints/anthropic:
// api_router.py, protocol.py, serving.py, AnthropicServingMessages). vLLM
// converts the request to a chat completion request
// (_convert_anthropic_to_openai_request), runs it through its chat server
// and converts the reply back: messages_full_converter for a whole reply,
// message_stream_converter for a stream. So a Messages request is a chat
// request underneath, and the sim generates it as one: the same prompt
// gives the same text as on /v1/chat/completions. What vLLM's conversion
// implies, and the sim therefore does:
//
//   - The reply's id is the chat completion's id ("chatcmpl-…"), and a
//     tool_use block's id is the chat tool call's id ("chatcmpl-tool-…",
//     or the Mistral form); vLLM makes no "msg_" or "toolu_" ids.
//   - stop_reason maps the chat finish_reason: stop → end_turn, length →
//     max_tokens, tool_calls → tool_use. A named tool choice finishes with
//     "stop", so it ends with end_turn; stop_sequence is never set, and a
//     whole reply leaves it out (model_dump(exclude_none=True)).
//   - A stream is the chat stream with include_usage and
//     continuous_usage_stats on, re-encoded event by event with
//     model_dump_json(exclude_unset=True): message_start (whose message
//     lacks "type" and "role", which were never set), content_block_start,
//     content_block_delta (text_delta or input_json_delta),
//     content_block_stop, message_delta, message_stop. There is no ping.
//   - Errors the chat server returns are re-shaped by
//     translate_error_response to {"type":"error","error":{"type":
//     <the OpenAI error type>,"message":…}} with the same status; request
//     validation errors come from the app-wide handler in the OpenAI shape.
//   - A mid-stream engine error reaches the converter as the chat stream's
//     {"error": …} event, which does not validate as a
//     ChatCompletionStreamResponse: the converter answers with one
//     "event: error" whose error is internal_error with pydantic's
//     validation message, and the stream ends there, without message_stop.
//   - A whole reply's tool_use input is json.loads of the call's
//     arguments: a named call cut short by max_tokens cannot be parsed and
//     the request fails with 500 internal_error; a "required" call cut
//     short yields no call at all (vLLM's parse of the call list fails).

// messagesParsed is a validated Messages (or count_tokens) request.
type messagesParsed struct {
	model       string
	messages    []Message
	maxTokens   int
	stream      bool
	temperature *float64
	tools       []toolParam
	toolChoice  json.RawMessage // in chat's terms
}

// parseMessages decodes and validates a POST /v1/messages body.
func (s *Server) parseMessages(body []byte) (generationSpec, *apiError) {
	spec := generationSpec{endpoint: endpointMessages, n: 1}
	m, bad := parseMessagesBody(body, true)
	if m != nil {
		spec.stream = m.stream
	}
	if bad != nil {
		return spec, bad
	}
	if m.model != s.cfg.Model {
		return spec, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", m.model), param: "model"}
	}
	prompt := RenderChat(m.messages)
	spec.prompts = []promptSpec{{key: prompt, ids: tokenIDs(prompt)}}
	tools, perr := parseToolChoice(m.tools, m.toolChoice)
	if perr != nil {
		return spec, perr
	}
	spec.tools = tools
	req := completionRequest{MaxTokens: &m.maxTokens, Temperature: m.temperature, Stream: m.stream}
	if perr := s.checkSampling(&req, &spec); perr != nil {
		return spec, perr
	}
	// vLLM asks its chat server for a stream with include_usage and
	// continuous_usage_stats, whose usage the events carry.
	spec.includeUsage = m.stream
	spec.continuousUsage = m.stream
	return spec, nil
}

// parseMessagesBody validates a body against vLLM's AnthropicMessagesRequest
// (or AnthropicCountTokensRequest, when full is false: no max_tokens,
// stream, temperature or stop_sequences) and converts it to chat terms as
// _convert_anthropic_to_openai_request does. The parsed request is returned
// as far as it got, so the record sees the stream flag of a bad request.
func parseMessagesBody(body []byte, full bool) (*messagesParsed, *apiError) {
	fields, bad := decodeBody(body)
	if bad != nil {
		return nil, bad
	}
	m := &messagesParsed{}
	if full && jsonKind(fields["stream"]) == "bool" {
		_ = json.Unmarshal(fields["stream"], &m.stream)
	}
	trimmed := bytes.TrimSpace(body)
	var v validationErrors
	// Fields in the model's order, as pydantic checks them.
	if raw, ok := fields["model"]; !ok {
		v.missing(trimmed, "body", "model")
	} else if checkString(&v, raw, "body", "model") {
		_ = json.Unmarshal(raw, &m.model)
		if m.model == "" {
			v.valueError(raw, "Model is required", "body", "model")
		}
	}
	var system []string
	if raw, ok := fields["messages"]; !ok {
		v.missing(trimmed, "body", "messages")
	} else {
		m.messages, system = checkAnthropicMessages(&v, raw)
	}
	if full {
		if raw, ok := fields["max_tokens"]; !ok {
			v.missing(trimmed, "body", "max_tokens")
		} else if n, ok := checkInt(&v, raw, "body", "max_tokens"); ok {
			if n <= 0 {
				v.valueError(raw, "max_tokens must be positive", "body", "max_tokens")
			}
			m.maxTokens = n
		}
		if raw := fields["stop_sequences"]; present(raw) {
			checkStringList(&v, raw, "body", "stop_sequences")
		}
		if raw := fields["stream"]; present(raw) {
			checkBool(&v, raw, "body", "stream")
		}
	}
	var topSystem []string
	if raw := fields["system"]; present(raw) {
		topSystem = checkAnthropicContent(&v, raw, "body", "system")
	}
	if full {
		if raw := fields["temperature"]; present(raw) {
			if t, ok := checkFloat(&v, raw, "body", "temperature"); ok {
				m.temperature = &t
			}
		}
	}
	var choiceType, choiceName string
	if raw := fields["tool_choice"]; present(raw) {
		choiceType, choiceName = checkAnthropicToolChoice(&v, raw)
	}
	if raw := fields["tools"]; present(raw) {
		m.tools = checkAnthropicTools(&v, raw)
		if m.tools == nil {
			m.tools = []toolParam{}
		}
	}
	if e := v.err(); e != nil {
		return m, e
	}
	// The system prompt: the top-level system's text blocks, then those of
	// system messages, concatenated without separator (_convert_system_message).
	// vLLM drops blocks that start with "x-anthropic-billing-header", a
	// per-request header some clients put there, which would defeat
	// prefix caching.
	parts := make([]string, 0, len(topSystem)+len(system))
	for _, t := range append(topSystem, system...) {
		if !strings.HasPrefix(t, "x-anthropic-billing-header") {
			parts = append(parts, t)
		}
	}
	if joined := strings.Join(parts, ""); joined != "" {
		m.messages = append([]Message{{Role: "system", Content: joined}}, m.messages...)
	}
	// tool_choice in chat's terms (_convert_tool_choice); tools without a
	// choice are "auto" (_convert_tools).
	switch choiceType {
	case "auto", "none":
		m.toolChoice = json.RawMessage(strconv.Quote(choiceType))
	case "any":
		m.toolChoice = json.RawMessage(`"required"`)
	case "tool":
		m.toolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": choiceName}})
	default:
		if m.tools != nil {
			m.toolChoice = json.RawMessage(`"auto"`)
		}
	}
	return m, nil
}

// anthropicBlock is the part of an Anthropic content block the sim reads.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Content   json.RawMessage `json:"content"`
	ToolUseID *string         `json:"tool_use_id"`
}

// anthropicBlockTypes is AnthropicContentBlock.type's Literal.
var anthropicBlockTypes = []string{"text", "image", "tool_use", "tool_result", "tool_reference", "thinking", "redacted_thinking"}

// checkAnthropicMessages validates the messages list and converts it to
// chat messages as _convert_messages does; system messages are returned
// apart, as their text joins the system prompt.
func checkAnthropicMessages(v *validationErrors, raw json.RawMessage) (msgs []Message, system []string) {
	var items []json.RawMessage
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &items) != nil {
		v.add("list_type", []any{"body", "messages"}, "Input should be a valid list", pyRepr(raw))
		return nil, nil
	}
	for i, item := range items {
		var fields map[string]json.RawMessage
		if jsonKind(item) != "object" || json.Unmarshal(item, &fields) != nil {
			v.add("model_type", []any{"body", "messages", i}, "Input should be a valid dictionary or instance of AnthropicMessage", pyRepr(item))
			continue
		}
		role := ""
		if r, ok := fields["role"]; !ok {
			v.missing(item, "body", "messages", i, "role")
		} else {
			_ = json.Unmarshal(r, &role)
			switch role {
			case "ctx", "msg": // AnthropicMessage.normalize_role
				role = "user"
			case "user", "assistant", "system":
			default:
				v.add("literal_error", []any{"body", "messages", i, "role"}, "Input should be 'user', 'assistant' or 'system'", pyRepr(r))
			}
		}
		c, ok := fields["content"]
		if !ok {
			v.missing(item, "body", "messages", i, "content")
			continue
		}
		if role == "system" {
			system = append(system, checkAnthropicContent(v, c, "body", "messages", i, "content")...)
			continue
		}
		msgs = append(msgs, convertAnthropicMessage(v, role, c, i)...)
	}
	return msgs, system
}

// checkAnthropicContent validates a str | list[AnthropicContentBlock] value
// and returns its text: the string, or the non-empty text blocks.
func checkAnthropicContent(v *validationErrors, raw json.RawMessage, loc ...any) []string {
	blocks, text, ok := anthropicContent(v, raw, loc...)
	if !ok {
		return nil
	}
	if blocks == nil {
		return []string{text}
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != nil && *b.Text != "" {
			out = append(out, *b.Text)
		}
	}
	return out
}

// anthropicContent validates content: a string (blocks nil) or a list of
// blocks with valid types. On a type error pydantic reports both branches
// of the union, the string's first.
func anthropicContent(v *validationErrors, raw json.RawMessage, loc ...any) (blocks []anthropicBlock, text string, ok bool) {
	at := func(extra ...any) []any { return append(append([]any{}, loc...), extra...) }
	const listMarker = "list[AnthropicContentBlock]"
	switch jsonKind(raw) {
	case "string":
		_ = json.Unmarshal(raw, &text)
		return nil, text, true
	case "array":
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items)
		var errs validationErrors
		blocks = make([]anthropicBlock, 0, len(items))
		for j, item := range items {
			var b anthropicBlock
			var typ json.RawMessage
			var fields map[string]json.RawMessage
			if jsonKind(item) != "object" || json.Unmarshal(item, &fields) != nil {
				errs.add("model_type", at(listMarker, j), "Input should be a valid dictionary or instance of AnthropicContentBlock", pyRepr(item))
				continue
			}
			typ, has := fields["type"]
			if !has {
				errs.missing(item, at(listMarker, j, "type")...)
				continue
			}
			_ = json.Unmarshal(item, &b)
			valid := false
			for _, t := range anthropicBlockTypes {
				valid = valid || b.Type == t
			}
			if !valid {
				errs.add("literal_error", at(listMarker, j, "type"),
					"Input should be 'text', 'image', 'tool_use', 'tool_result', 'tool_reference', 'thinking' or 'redacted_thinking'", pyRepr(typ))
				continue
			}
			blocks = append(blocks, b)
		}
		if len(errs.errs) > 0 {
			v.add("string_type", at("str"), "Input should be a valid string", pyRepr(raw))
			v.errs = append(v.errs, errs.errs...)
			return nil, "", false
		}
		return blocks, "", true
	}
	v.add("string_type", at("str"), "Input should be a valid string", pyRepr(raw))
	v.add("list_type", at(listMarker), "Input should be a valid list", pyRepr(raw))
	return nil, "", false
}

// convertAnthropicMessage turns one user or assistant message into chat
// messages as _convert_messages and _convert_message_content do: text
// blocks make the content (joined with newlines, as a chat template joins
// text parts), a user's tool_result blocks become tool messages placed
// before it, and a user message left without content is dropped.
func convertAnthropicMessage(v *validationErrors, role string, raw json.RawMessage, i int) []Message {
	blocks, text, ok := anthropicContent(v, raw, "body", "messages", i, "content")
	if !ok {
		return nil
	}
	if blocks == nil {
		return []Message{{Role: role, Content: text}}
	}
	var out []Message
	var texts []string
	hasCalls := false
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text != nil && *b.Text != "" {
				texts = append(texts, *b.Text)
			}
		case "tool_use", "thinking":
			hasCalls = true // the message is kept, as its tool_calls or reasoning
		case "tool_result":
			if role == "user" {
				out = append(out, Message{Role: "tool", Content: toolResultText(b.Content)})
			} else {
				texts = append(texts, "Tool result: "+pyToolResult(b.Content))
			}
		}
	}
	if len(texts) == 0 && (role == "user" || !hasCalls) {
		if role == "user" {
			return out
		}
		return append(out, Message{Role: role})
	}
	return append(out, Message{Role: role, Content: strings.Join(texts, "\n")})
}

// toolResultText is a user tool_result's content as the tool message
// carries it: the string, or its text items joined with newlines.
func toolResultText(raw json.RawMessage) string {
	if jsonKind(raw) == "string" {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &items)
	var texts []string
	for _, it := range items {
		if it.Type == "text" {
			texts = append(texts, it.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// pyToolResult is str() of an assistant's tool_result content, as vLLM
// puts it after "Tool result: ".
func pyToolResult(raw json.RawMessage) string {
	switch jsonKind(raw) {
	case "", "null":
		return ""
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	return pyRepr(raw)
}

func checkStringList(v *validationErrors, raw json.RawMessage, loc ...any) {
	var items []json.RawMessage
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &items) != nil {
		v.add("list_type", loc, "Input should be a valid list", pyRepr(raw))
		return
	}
	for i, it := range items {
		checkString(v, it, append(append([]any{}, loc...), i)...)
	}
}

// checkAnthropicToolChoice validates AnthropicToolChoice and returns its
// type and name.
func checkAnthropicToolChoice(v *validationErrors, raw json.RawMessage) (typ, name string) {
	var fields map[string]json.RawMessage
	if jsonKind(raw) != "object" || json.Unmarshal(raw, &fields) != nil {
		v.add("model_type", []any{"body", "tool_choice"}, "Input should be a valid dictionary or instance of AnthropicToolChoice", pyRepr(raw))
		return "", ""
	}
	t, ok := fields["type"]
	if !ok {
		v.missing(raw, "body", "tool_choice", "type")
		return "", ""
	}
	_ = json.Unmarshal(t, &typ)
	switch typ {
	case "auto", "any", "tool", "none":
	default:
		v.add("literal_error", []any{"body", "tool_choice", "type"}, "Input should be 'auto', 'any', 'tool' or 'none'", pyRepr(t))
		return "", ""
	}
	if n := fields["name"]; present(n) && checkString(v, n, "body", "tool_choice", "name") {
		_ = json.Unmarshal(n, &name)
	}
	if typ == "tool" && name == "" {
		v.valueError(raw, "tool_choice.name is required when type is 'tool'", "body", "tool_choice")
		return "", ""
	}
	return typ, name
}

// checkAnthropicTools validates the tools and converts them to chat's
// function tools (_convert_tools): name, and input_schema as parameters.
func checkAnthropicTools(v *validationErrors, raw json.RawMessage) []toolParam {
	var items []json.RawMessage
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &items) != nil {
		v.add("list_type", []any{"body", "tools"}, "Input should be a valid list", pyRepr(raw))
		return nil
	}
	var tools []toolParam
	for i, item := range items {
		var fields map[string]json.RawMessage
		if jsonKind(item) != "object" || json.Unmarshal(item, &fields) != nil {
			v.add("model_type", []any{"body", "tools", i}, "Input should be a valid dictionary or instance of AnthropicTool", pyRepr(item))
			continue
		}
		var t toolParam
		t.Type = "function"
		if n, ok := fields["name"]; !ok {
			v.missing(item, "body", "tools", i, "name")
		} else if checkString(v, n, "body", "tools", i, "name") {
			_ = json.Unmarshal(n, &t.Function.Name)
		}
		if s, ok := fields["input_schema"]; !ok {
			v.missing(item, "body", "tools", i, "input_schema")
		} else if jsonKind(s) != "object" {
			v.add("dict_type", []any{"body", "tools", i, "input_schema"}, "Input should be a valid dictionary", pyRepr(s))
		} else {
			t.Function.Parameters = s
		}
		tools = append(tools, t)
	}
	return tools
}

// anthropicStopReason maps a chat finish_reason as AnthropicServingMessages'
// stop_reason_map does.
func anthropicStopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	}
	return "end_turn"
}

// messagesFormat is the Messages endpoint's wire format.
type messagesFormat struct{}

func (messagesFormat) stream(g *generation) streamWire {
	return &messagesWire{g: g, buf: make([]byte, 0, 512)}
}

// anthropicError is AnthropicErrorResponse.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (messagesFormat) errorBody(s *Server, e apiError) []byte {
	if e.plain {
		return s.errorJSON(e)
	}
	var a anthropicError
	a.Type = "error"
	a.Error.Type, a.Error.Message = e.errType(), e.message
	b, _ := marshalPlain(a) // plain strings cannot fail to encode
	return b
}

// messagesReply is AnthropicMessagesResponse as vLLM sends a whole reply:
// model_dump(exclude_none=True), so no stop_sequence and no cache usage.
type messagesReply struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Role       string            `json:"role"`
	Content    []json.RawMessage `json:"content"`
	Model      string            `json:"model"`
	StopReason string            `json:"stop_reason"`
	Usage      messagesUsage     `json:"usage"`
}

type messagesUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func (messagesFormat) whole(g *generation) (int, []byte) {
	q := g.seqs[0]
	reply := messagesReply{
		ID: g.id, Type: "message", Role: "assistant", Content: []json.RawMessage{}, Model: g.s.cfg.Model,
		StopReason: anthropicStopReason(q.finishReason(&g.spec)),
		Usage:      messagesUsage{InputTokens: g.spec.promptTokens(), OutputTokens: len(q.tokens)},
	}
	switch {
	case q.call == nil:
		if text := q.text(); text != "" {
			block, _ := marshalPlain(struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{"text", text})
			reply.Content = append(reply.Content, block)
		}
	case g.spec.tools.mode == toolsRequired && q.reason == "length":
		// vLLM parses a "required" reply as a list of calls; cut short it
		// does not parse and the reply has no call.
	default:
		var args strings.Builder
		for _, i := range q.tokens {
			args.WriteString(q.call.rawPiece(i))
		}
		if msg := pyJSONError(args.String()); msg != "" {
			// json.loads raises in messages_full_converter; the router
			// answers its exception with 500 internal_error.
			e := apiError{status: http.StatusInternalServerError, typ: "internal_error", message: msg}
			return e.status, messagesFormat{}.errorBody(g.s, e)
		}
		var input bytes.Buffer
		_ = json.Compact(&input, []byte(args.String())) // valid, as just checked
		block, _ := marshalPlain(struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{"tool_use", q.call.id, q.call.name, input.Bytes()})
		reply.Content = append(reply.Content, block)
	}
	body, err := marshalPlain(reply)
	if err != nil {
		e := apiError{status: http.StatusInternalServerError, typ: "internal_error", message: "encoding the reply: " + err.Error()}
		return e.status, messagesFormat{}.errorBody(g.s, e)
	}
	return http.StatusOK, body
}

func (messagesFormat) garbageWhole(g *generation) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"message","role":"assistant","content":[{"type":"text","text":"`, g.id)
}

func (messagesFormat) oversizeWhole(g *generation) []byte {
	b := messagesFormat{}.garbageWhole(g)
	b = append(b, bytes.Repeat([]byte("x"), oversizeBytes)...)
	return fmt.Appendf(b, `"}],"model":%q,"stop_reason":"max_tokens","usage":{"input_tokens":%d,"output_tokens":%d}}`,
		g.s.cfg.Model, g.spec.promptTokens(), g.computed)
}

// messagesWire streams a Messages reply as message_stream_converter
// re-encodes vLLM's chat stream. Each event is
// "event: NAME\ndata: JSON\n\n", the JSON in AnthropicStreamEvent's field
// order (type, message, delta, content_block, index, error, usage) with the
// unset fields left out. The reply has one content block, index 0.
type messagesWire struct {
	g          *generation
	buf        []byte
	blockOpen  bool
	stopReason string
}

func (w *messagesWire) event(name string) {
	w.buf = append(w.buf, "event: "...)
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, "\ndata: "...)
}

func (w *messagesWire) preamble() {}

// open is the chat stream's role chunk, which the converter turns into
// message_start with the prompt's tokens from the chunk's usage.
func (w *messagesWire) open(seqs []*sequence) {
	w.event("message_start")
	w.buf = append(w.buf, `{"type":"message_start","message":{"id":`...)
	w.buf = appendJSONString(w.buf, w.g.id)
	w.buf = append(w.buf, `,"content":[],"model":`...)
	w.buf = append(w.buf, jsonText(w.g.s.cfg.Model)...)
	w.buf = append(w.buf, `,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	w.buf = strconv.AppendInt(w.buf, int64(len(seqs[0].prompt.ids)), 10)
	w.buf = append(w.buf, `,"output_tokens":0}}}`+"\n\n"...)
}

func (w *messagesWire) startBlock(block []byte) {
	w.event("content_block_start")
	w.buf = append(w.buf, `{"type":"content_block_start","content_block":`...)
	w.buf = append(w.buf, block...)
	w.buf = append(w.buf, `,"index":0}`+"\n\n"...)
	w.blockOpen = true
}

func (w *messagesWire) delta(kind, key string, text []byte) {
	w.event("content_block_delta")
	w.buf = append(w.buf, `{"type":"content_block_delta","delta":{"type":"`...)
	w.buf = append(w.buf, kind...)
	w.buf = append(w.buf, `","`...)
	w.buf = append(w.buf, key...)
	w.buf = append(w.buf, `":"`...)
	w.buf = append(w.buf, text...)
	w.buf = append(w.buf, `"},"index":0}`+"\n\n"...)
}

func (w *messagesWire) text(_ *sequence, text []byte) {
	if len(text) == 0 {
		return // the converter skips empty content
	}
	if !w.blockOpen {
		w.startBlock([]byte(`{"type":"text","text":""}`))
	}
	w.delta("text_delta", "text", text)
}

func (w *messagesWire) toolStart(q *sequence, args []byte) {
	var block []byte
	block = append(block, `{"type":"tool_use","id":`...)
	block = appendJSONString(block, q.call.id)
	block = append(block, `,"name":`...)
	block = append(block, jsonText(q.call.name)...)
	block = append(block, `,"input":{}}`...)
	w.startBlock(block)
	w.toolArgs(q, args)
}

func (w *messagesWire) toolArgs(_ *sequence, args []byte) {
	if len(args) > 0 {
		w.delta("input_json_delta", "partial_json", args)
	}
}

func (w *messagesWire) finish(q *sequence) {
	w.stopReason = anthropicStopReason(q.finishReason(&w.g.spec))
}

// close is the chat stream's usage chunk and [DONE]: content_block_stop,
// message_delta with the stop reason and the request's usage, message_stop.
func (w *messagesWire) close(computed int) {
	if w.blockOpen {
		w.event("content_block_stop")
		w.buf = append(w.buf, `{"type":"content_block_stop","index":0}`+"\n\n"...)
		w.blockOpen = false
	}
	reason := w.stopReason
	if reason == "" {
		reason = anthropicStopReason("stop")
	}
	w.event("message_delta")
	w.buf = append(w.buf, `{"type":"message_delta","delta":{"stop_reason":"`...)
	w.buf = append(w.buf, reason...)
	w.buf = append(w.buf, `"},"usage":{"input_tokens":`...)
	w.buf = strconv.AppendInt(w.buf, int64(w.g.spec.promptTokens()), 10)
	w.buf = append(w.buf, `,"output_tokens":`...)
	w.buf = strconv.AppendInt(w.buf, int64(computed), 10)
	w.buf = append(w.buf, "}}\n\n"...)
	w.event("message_stop")
	w.buf = append(w.buf, `{"type":"message_stop"}`+"\n\n"...)
}

// failure is what the converter makes of the chat stream's error event: it
// fails to validate as a ChatCompletionStreamResponse (no model, no
// choices), and the converter's except clause sends pydantic's message as
// an internal_error and ends the stream. The error's status does not
// survive; done does not matter, as the converter stops reading.
func (w *messagesWire) failure(e apiError, _ bool) bool {
	chatEvent := streamErrorJSON(e)
	if w.g.s.cfg.LegacyErrors {
		chatEvent = w.g.s.errorJSON(e)
	}
	w.event("error")
	w.buf = append(w.buf, `{"type":"error","error":{"type":"internal_error","message":`...)
	w.buf = append(w.buf, jsonText(chunkValidationMessage(chatEvent))...)
	w.buf = append(w.buf, "}}\n\n"...)
	return false
}

// heldFailure is the converter's error event, as failure writes it.
func (w *messagesWire) heldFailure(e apiError) { w.failure(e, false) }

// pydanticVersion is the pydantic release whose documentation links
// pydantic's validation messages carry.
const pydanticVersion = "2.12"

// chunkValidationMessage is str() of the ValidationError pydantic raises
// when vLLM validates the chat stream's error event as a
// ChatCompletionStreamResponse: "model" and "choices" are required.
func chunkValidationMessage(event []byte) string {
	input := truncateInputValue(pyRepr(event))
	var b strings.Builder
	b.WriteString("2 validation errors for ChatCompletionStreamResponse")
	for _, field := range []string{"model", "choices"} {
		fmt.Fprintf(&b, "\n%s\n  Field required [type=missing, input_value=%s, input_type=dict]\n    For further information visit https://errors.pydantic.dev/%s/v/missing",
			field, input, pydanticVersion)
	}
	return b.String()
}

// truncateInputValue shortens a repr as pydantic-core does in a
// ValidationError's text: above 50 characters, the first 25 and the last
// 24 around "...".
func truncateInputValue(s string) string {
	r := []rune(s)
	if len(r) <= 50 {
		return s
	}
	return string(r[:25]) + "..." + string(r[len(r)-24:])
}

func (w *messagesWire) garbage() []byte {
	var b []byte
	b = append(b, "event: content_block_delta\ndata: "...)
	b = append(b, `{"type":"content_block_delta","delta":{"type":"text_delta","text":"`...)
	return append(b, "\n\n"...)
}

func (w *messagesWire) oversize() []byte {
	var b []byte
	b = append(b, "event: content_block_delta\ndata: "...)
	b = append(b, `{"type":"content_block_delta","delta":{"type":"text_delta","text":"`...)
	b = append(b, bytes.Repeat([]byte("x"), oversizeBytes)...)
	return append(b, `"},"index":0}`+"\n\n"...)
}

func (w *messagesWire) bytes() []byte { return w.buf }
func (w *messagesWire) reset()        { w.buf = w.buf[:0] }

// serveCountTokens answers POST /v1/messages/count_tokens as
// AnthropicServingMessages.count_tokens does: the rendered prompt's tokens,
// twice (model_dump(exclude_none=True)).
func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	var e *apiError
	var m *messagesParsed
	if err != nil {
		e = &apiError{status: http.StatusBadRequest, message: "reading the request body: " + err.Error()}
	} else {
		m, e = parseMessagesBody(body, false)
	}
	if e == nil && m.model != s.cfg.Model {
		e = &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", m.model), param: "model"}
	}
	if e != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		_, _ = w.Write(messagesFormat{}.errorBody(s, *e))
		return
	}
	n := len(tokenIDs(RenderChat(m.messages)))
	type contextManagement struct {
		OriginalInputTokens int `json:"original_input_tokens"`
	}
	writeJSON(w, http.StatusOK, struct {
		InputTokens       int               `json:"input_tokens"`
		ContextManagement contextManagement `json:"context_management"`
	}{n, contextManagement{n}})
}
