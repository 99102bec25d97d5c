package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The OpenAI Responses API as vLLM serves it for a non-harmony model
// (vllm/entrypoints/openai/responses: api_router.py, protocol.py,
// serving.py OpenAIServingResponses, simple_streaming_events.py,
// utils.py construct_input_messages). What the sim takes from there:
//
//   - The prompt is a chat: instructions as a system message, then (with
//     previous_response_id) the previous request's messages and the
//     previous output's message texts as assistant messages, then the
//     input (a string is one user message). The sim renders it with its
//     chat template, so the same conversation gives the same text as on
//     /v1/chat/completions.
//   - vLLM stores responses only with VLLM_ENABLE_RESPONSES_API_STORE=1
//     (Config.EnableResponsesStore); otherwise store=true is silently
//     ignored, so every previous_response_id and GET /v1/responses/{id}
//     is 404 "Response with id '…' not found." (invalid_request_error,
//     param response_id). vLLM's store is a dict in the server process:
//     a restarted replica has forgotten it. The sim keeps the last
//     responsesStoreLimit responses.
//   - The reply is ResponsesResponse.model_dump(): every field, nulls
//     included. Its output is built when generation ends
//     (_make_response_output_items): a "message" item ("msg_" + hex) with
//     one output_text part, or a "function_call" item ("fc_" + hex) whose
//     call_id is make_tool_call_id's "chatcmpl-tool-" + hex. status is
//     "incomplete" with incomplete_details {"reason":"max_output_tokens"}
//     when max_output_tokens cut the output.
//   - A stream is "event: TYPE\ndata: JSON\n\n" (_convert_stream_to_sse_events)
//     with sequence_number from 0: response.created, response.in_progress
//     as soon as the request is taken in; at the first delta
//     response.output_item.added and (for text) response.content_part.added;
//     response.output_text.delta or response.function_call_arguments.delta
//     per chunk; at the end response.output_text.done,
//     response.content_part.done (or response.function_call_arguments.done)
//     and response.output_item.done; last response.completed, whose
//     response is built afresh and so carries new item ids ("msg_…",
//     "fc_…") where the stream's items had plain hex ids and "call_…"
//     call ids. There is no response.failed and no error event: on an
//     engine error vLLM's stream generator tries to validate the chat-style
//     {"error": …} JSON as a stream event, fails, and the exception ends
//     the response in the middle of its chunked body (the connection
//     closes without the terminating chunk).

// responsesStoreLimit bounds the responses a replica keeps; vLLM's store
// grows without bound.
const responsesStoreLimit = 10000

// responsesRequest is what a Responses request carries into its response
// object (ResponsesResponse.from_request) and into the store.
type responsesRequest struct {
	instructions       json.RawMessage
	metadata           json.RawMessage
	temperature        float64
	topP               float64
	toolChoice         json.RawMessage
	tools              []json.RawMessage
	parallelToolCalls  bool
	maxOutputTokens    int
	maxToolCalls       json.RawMessage
	previousResponseID json.RawMessage
	reasoning          json.RawMessage
	serviceTier        string
	text               json.RawMessage
	truncation         string
	user               json.RawMessage
	background         bool
	store              bool      // the response is kept (store requested and the store enabled)
	messages           []Message // the conversation the prompt renders
}

// orNull is raw, or JSON null when raw is absent.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// parseResponses decodes and validates a POST /v1/responses body in the
// order create_responses checks it.
func (s *Server) parseResponses(body []byte) (generationSpec, *apiError) {
	spec := generationSpec{endpoint: endpointResponses, n: 1}
	fields, bad := decodeBody(body)
	if bad != nil {
		return spec, bad
	}
	if jsonKind(fields["stream"]) == "bool" {
		_ = json.Unmarshal(fields["stream"], &spec.stream)
	}
	trimmed := bytes.TrimSpace(body)
	var v validationErrors
	background := jsonKind(fields["background"]) == "bool" && string(bytes.TrimSpace(fields["background"])) == "true"
	storeRequested := !(jsonKind(fields["store"]) == "bool" && string(bytes.TrimSpace(fields["store"])) == "false")
	if background && !storeRequested {
		// ResponsesRequest.validate_background, a "before" validator: it
		// fails the whole model before any field is looked at.
		v.valueError(trimmed, "background can only be used when `store` is true", "body")
		return spec, v.err()
	}
	if present(fields["background"]) {
		checkBool(&v, fields["background"], "body", "background")
	}
	var input json.RawMessage
	if raw, ok := fields["input"]; !ok {
		v.missing(trimmed, "body", "input")
	} else if k := jsonKind(raw); k == "string" || k == "array" {
		input = raw
		if k == "array" {
			var items []json.RawMessage
			_ = json.Unmarshal(raw, &items)
			for i, it := range items {
				if jsonKind(it) != "object" {
					v.add("string_type", []any{"body", "input", "str"}, "Input should be a valid string", pyRepr(raw))
					v.add("model_type", []any{"body", "input", "list[union]", i}, "Input should be an object", pyRepr(it))
					break
				}
			}
		}
	} else {
		v.add("string_type", []any{"body", "input", "str"}, "Input should be a valid string", pyRepr(raw))
		v.add("list_type", []any{"body", "input", "list[union]"}, "Input should be a valid list", pyRepr(raw))
	}
	req := &responsesRequest{
		instructions: orNull(fields["instructions"]), metadata: orNull(fields["metadata"]),
		maxToolCalls: orNull(fields["max_tool_calls"]), previousResponseID: orNull(fields["previous_response_id"]),
		reasoning: orNull(fields["reasoning"]), text: orNull(fields["text"]), user: orNull(fields["user"]),
		serviceTier: "auto", truncation: "disabled", parallelToolCalls: true, topP: 1, temperature: 1,
		background: background,
	}
	var instructions string
	if raw := fields["instructions"]; present(raw) && checkString(&v, raw, "body", "instructions") {
		_ = json.Unmarshal(raw, &instructions)
	}
	maxOutput := -1
	if raw := fields["max_output_tokens"]; present(raw) {
		if n, ok := checkInt(&v, raw, "body", "max_output_tokens"); ok {
			maxOutput = n
		}
	}
	model := ""
	if raw := fields["model"]; present(raw) && checkString(&v, raw, "body", "model") {
		_ = json.Unmarshal(raw, &model)
	}
	if raw := fields["parallel_tool_calls"]; present(raw) && checkBool(&v, raw, "body", "parallel_tool_calls") {
		_ = json.Unmarshal(raw, &req.parallelToolCalls)
	}
	prevID := ""
	if raw := fields["previous_response_id"]; present(raw) && checkString(&v, raw, "body", "previous_response_id") {
		_ = json.Unmarshal(raw, &prevID)
	}
	if raw := fields["service_tier"]; present(raw) && checkString(&v, raw, "body", "service_tier") {
		_ = json.Unmarshal(raw, &req.serviceTier)
	}
	if raw := fields["store"]; present(raw) {
		checkBool(&v, raw, "body", "store")
	}
	if raw := fields["stream"]; present(raw) {
		checkBool(&v, raw, "body", "stream")
	}
	var temperature *float64
	if raw := fields["temperature"]; present(raw) {
		if t, ok := checkFloat(&v, raw, "body", "temperature"); ok {
			temperature = &t
			req.temperature = t
		}
	}
	toolChoice := json.RawMessage(`"auto"`)
	if raw := fields["tool_choice"]; present(raw) {
		toolChoice = checkResponsesToolChoice(&v, raw)
	}
	var tools []toolParam
	if raw := fields["tools"]; present(raw) {
		tools, req.tools = checkResponsesTools(&v, raw)
	}
	decls := engineToolDecls(req.tools)
	if raw := fields["top_p"]; present(raw) {
		if p, ok := checkFloat(&v, raw, "body", "top_p"); ok {
			req.topP = p
		}
	}
	if raw := fields["truncation"]; present(raw) && checkString(&v, raw, "body", "truncation") {
		_ = json.Unmarshal(raw, &req.truncation)
	}
	if e := v.err(); e != nil {
		return spec, e
	}
	if req.tools == nil {
		req.tools = []json.RawMessage{}
	}
	req.toolChoice = toolChoice

	// create_responses: the model, then the store, then the previous
	// response, then the prompt, then its length, then sampling.
	if model != "" && model != s.cfg.Model {
		return spec, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", model), param: "model"}
	}
	if background {
		if !s.cfg.EnableResponsesStore {
			return spec, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "background",
				message: "This vLLM engine does not support `store=True` and therefore does not support the background mode. To enable these features, set the environment variable `VLLM_ENABLE_RESPONSES_API_STORE=1` when launching the vLLM server."}
		}
		return spec, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "background",
			message: "background mode is not simulated by this replica"}
	}
	req.store = storeRequested && s.cfg.EnableResponsesStore
	var prev *storedResponse
	if prevID != "" {
		if prev = s.responses.get(prevID); prev == nil {
			return spec, responseNotFound(prevID)
		}
	}
	msgs, perr := responsesMessages(instructions, input, prev)
	if perr != nil {
		return spec, perr
	}
	req.messages = msgs
	prompt := RenderChat(msgs)
	ids := tokenIDs(prompt)
	spec.prompts = []promptSpec{{key: prompt, ids: ids}}
	spec.responses = req
	choice, perr := parseToolChoice(tools, responsesChatToolChoice(toolChoice, tools))
	if perr != nil {
		return spec, perr
	}
	spec.tools = choice
	spec.engine = s.planEngineCall(decls, toolChoice)
	if len(ids) >= s.cfg.MaxModelLen {
		return spec, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "input",
			message: fmt.Sprintf("The engine prompt length %d exceeds the max_model_len %d. Please reduce prompt.", len(ids), s.cfg.MaxModelLen)}
	}
	// to_sampling_params: max_output_tokens is capped by what the context
	// window leaves; unset, the sim uses its default (vLLM fills the
	// window).
	room := s.cfg.MaxModelLen - len(ids)
	maxTokens := min(s.cfg.DefaultMaxTokens, room)
	if maxOutput >= 0 {
		maxTokens = min(maxOutput, room)
	}
	if maxTokens < 1 {
		return spec, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens), param: "max_tokens"}
	}
	if temperature != nil && *temperature < 0 {
		return spec, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("temperature must be non-negative, got %v.", *temperature), param: "temperature"}
	}
	spec.prompts[0].maxTokens = maxTokens
	req.maxOutputTokens = maxTokens
	if temperature != nil && *temperature > 0 {
		spec.seed = rand.Int64() // sampling without a seed, which the Responses API does not take
	}
	return spec, nil
}

// responseNotFound is _make_not_found_error.
func responseNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "response_id",
		message: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// checkResponsesToolChoice validates tool_choice and returns it as
// ResponsesResponse echoes it: a mode string, or an object.
func checkResponsesToolChoice(v *validationErrors, raw json.RawMessage) json.RawMessage {
	switch jsonKind(raw) {
	case "string":
		var mode string
		_ = json.Unmarshal(raw, &mode)
		if mode != "none" && mode != "auto" && mode != "required" {
			v.add("literal_error", []any{"body", "tool_choice", "literal['none','auto','required']"}, "Input should be 'none', 'auto' or 'required'", pyRepr(raw))
		}
		return raw
	case "object":
		var f struct {
			Type string  `json:"type"`
			Name *string `json:"name"`
		}
		_ = json.Unmarshal(raw, &f)
		if f.Type == "function" {
			if f.Name == nil {
				v.missing(raw, "body", "tool_choice", "ToolChoiceFunction", "name")
				return raw
			}
			// ToolChoiceFunction dumps as name, type.
			out, _ := marshalPlain(struct {
				Name string `json:"name"`
				Type string `json:"type"`
			}{*f.Name, "function"})
			return out
		}
		return raw
	}
	v.add("literal_error", []any{"body", "tool_choice", "literal['none','auto','required']"}, "Input should be 'none', 'auto' or 'required'", pyRepr(raw))
	return raw
}

// checkResponsesTools validates tools, returning the function tools in
// chat's terms and every tool as the response object echoes it (a function
// tool as FunctionTool.model_dump(): name, parameters, strict, type,
// description).
func checkResponsesTools(v *validationErrors, raw json.RawMessage) ([]toolParam, []json.RawMessage) {
	var items []json.RawMessage
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &items) != nil {
		v.add("list_type", []any{"body", "tools"}, "Input should be a valid list", pyRepr(raw))
		return nil, nil
	}
	var fns []toolParam
	echo := make([]json.RawMessage, 0, len(items))
	for i, item := range items {
		var f struct {
			Type        string          `json:"type"`
			Name        *string         `json:"name"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      json.RawMessage `json:"strict"`
			Description json.RawMessage `json:"description"`
		}
		if jsonKind(item) != "object" || json.Unmarshal(item, &f) != nil {
			v.add("model_type", []any{"body", "tools", i}, "Input should be an object", pyRepr(item))
			continue
		}
		if f.Type != "function" {
			echo = append(echo, item)
			continue
		}
		if f.Name == nil {
			v.missing(item, "body", "tools", i, "function", "name")
			continue
		}
		var t toolParam
		t.Type = "function"
		t.Function.Name = *f.Name
		t.Function.Parameters = f.Parameters
		fns = append(fns, t)
		out, _ := marshalPlain(struct {
			Name        string          `json:"name"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      json.RawMessage `json:"strict"`
			Type        string          `json:"type"`
			Description json.RawMessage `json:"description"`
		}{*f.Name, orNull(f.Parameters), orNull(f.Strict), "function", orNull(f.Description)})
		echo = append(echo, out)
	}
	return fns, echo
}

// responsesChatToolChoice puts a Responses tool_choice in chat's terms for
// parseToolChoice; choices other than the modes and a named function
// leave the model free, as "auto".
func responsesChatToolChoice(choice json.RawMessage, tools []toolParam) json.RawMessage {
	if jsonKind(choice) == "string" {
		if tools == nil {
			return nil // no function tools: vLLM renders no tools and parses no calls
		}
		return choice
	}
	var f struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(choice, &f)
	if f.Type != "function" || tools == nil {
		return nil
	}
	out, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": f.Name}})
	return out
}

// responsesMessages builds the conversation as construct_input_messages
// does: instructions, the previous request's messages, the previous
// output's message texts, then the input.
func responsesMessages(instructions string, input json.RawMessage, prev *storedResponse) ([]Message, *apiError) {
	var msgs []Message
	if instructions != "" {
		msgs = append(msgs, Message{Role: "system", Content: instructions})
	}
	if prev != nil {
		msgs = append(msgs, prev.messages...)
		for _, text := range prev.outputTexts {
			msgs = append(msgs, Message{Role: "assistant", Content: text})
		}
	}
	if jsonKind(input) == "string" {
		var s string
		_ = json.Unmarshal(input, &s)
		return append(msgs, Message{Role: "user", Content: s}), nil
	}
	var items []json.RawMessage
	_ = json.Unmarshal(input, &items)
	for i, it := range items {
		var item struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(it, &item)
		switch item.Type {
		case "function_call":
			// An assistant message whose only content is the call.
			msgs = append(msgs, Message{Role: "assistant"})
		case "function_call_output":
			msgs = append(msgs, Message{Role: "tool", Content: responsesOutputText(item.Output)})
		case "reasoning":
			msgs = append(msgs, Message{Role: "assistant"})
		default:
			text, err := responsesContentText(item.Content)
			if err != nil {
				return nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("input[%d].content: %v", i, err), param: "input"}
			}
			msgs = append(msgs, Message{Role: item.Role, Content: text})
		}
	}
	return msgs, nil
}

// responsesContentText flattens a message item's content: a string, or
// its text parts (input_text, output_text, text) joined with newlines as
// a chat template joins text parts. An output message contributes only its
// first part, as _construct_single_message_from_response_item takes it.
func responsesContentText(raw json.RawMessage) (string, error) {
	switch jsonKind(raw) {
	case "", "null":
		return "", nil
	case "string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or a list of content parts: %w", err)
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "output_text":
			return p.Text, nil
		case "input_text", "text":
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// responsesOutputText is a function_call_output's output as the tool
// message carries it.
func responsesOutputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// storedResponse is one kept response: the body GET returns, and what a
// later previous_response_id continues from (vLLM's msg_store entry and
// the output's message texts).
type storedResponse struct {
	body        []byte
	messages    []Message
	outputTexts []string
}

// responseStore is a replica's store of responses, the newest
// responsesStoreLimit of them. It lives as long as the replica's process:
// a crash empties it.
type responseStore struct {
	mu    sync.Mutex
	items map[string]*storedResponse
	order []string // ids, oldest first
}

func (st *responseStore) get(id string) *storedResponse {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.items[id]
}

// put keeps a finished response unless the replica life that made it has
// ended: the check and the insert share the lock a crash's reset takes, so
// a response finishing during a crash cannot outlive it.
func (st *responseStore) put(g *generation, id string, r *storedResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if replicaDown(g.ctx) {
		return
	}
	if st.items == nil {
		st.items = make(map[string]*storedResponse)
	}
	if _, ok := st.items[id]; !ok {
		st.order = append(st.order, id)
	}
	st.items[id] = r
	for len(st.order) > responsesStoreLimit {
		delete(st.items, st.order[0])
		st.order = st.order[1:]
	}
}

// reset forgets every response, as a restarted engine process has.
func (st *responseStore) reset() {
	st.mu.Lock()
	st.items, st.order = nil, nil
	st.mu.Unlock()
}

// serveGetResponse answers GET /v1/responses/{id} (retrieve_responses): the
// stored response, or 404.
func (s *Server) serveGetResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	stored := s.responses.get(id)
	if stored == nil {
		s.writeError(w, *responseNotFound(id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(stored.body)
}

// serveCancelResponse answers POST /v1/responses/{id}/cancel
// (cancel_responses): a stored response is never a background one here, so
// it cannot be cancelled.
func (s *Server) serveCancelResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.responses.get(id) == nil {
		s.writeError(w, *responseNotFound(id))
		return
	}
	s.writeError(w, apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "response_id",
		message: "Cannot cancel a synchronous response."})
}

// responseObject is ResponsesResponse in its field order.
type responseObject struct {
	ID                 string            `json:"id"`
	CreatedAt          int64             `json:"created_at"`
	IncompleteDetails  *incompleteReason `json:"incomplete_details"`
	Instructions       json.RawMessage   `json:"instructions"`
	Metadata           json.RawMessage   `json:"metadata"`
	Model              string            `json:"model"`
	Object             string            `json:"object"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	Temperature        pyFloatJSON       `json:"temperature"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopP               pyFloatJSON       `json:"top_p"`
	Background         bool              `json:"background"`
	MaxOutputTokens    int               `json:"max_output_tokens"`
	MaxToolCalls       json.RawMessage   `json:"max_tool_calls"`
	PreviousResponseID json.RawMessage   `json:"previous_response_id"`
	Prompt             json.RawMessage   `json:"prompt"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	ServiceTier        string            `json:"service_tier"`
	Status             string            `json:"status"`
	Text               json.RawMessage   `json:"text"`
	TopLogprobs        json.RawMessage   `json:"top_logprobs"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	User               json.RawMessage   `json:"user"`
	InputMessages      json.RawMessage   `json:"input_messages"`
	OutputMessages     json.RawMessage   `json:"output_messages"`
}

type incompleteReason struct {
	Reason string `json:"reason"`
}

// responseUsage is vLLM's ResponseUsage. A non-harmony response has no
// per-turn metrics (SimpleContext.all_turn_metrics is empty).
type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens        int   `json:"cached_tokens"`
		InputTokensPerTurn  []int `json:"input_tokens_per_turn"`
		CachedTokensPerTurn []int `json:"cached_tokens_per_turn"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens         int   `json:"reasoning_tokens"`
		ToolOutputTokens        int   `json:"tool_output_tokens"`
		OutputTokensPerTurn     []int `json:"output_tokens_per_turn"`
		ToolOutputTokensPerTurn []int `json:"tool_output_tokens_per_turn"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseBody renders the response object of g with status and output.
func responseBody(g *generation, status string, output []json.RawMessage, u *responseUsage) []byte {
	req := g.spec.responses
	if req == nil {
		req = &responsesRequest{}
	}
	obj := responseObject{
		ID: g.id, CreatedAt: g.created, Instructions: orNull(req.instructions), Metadata: orNull(req.metadata),
		Model: g.s.cfg.Model, Object: "response", Output: output, ParallelToolCalls: req.parallelToolCalls,
		Temperature: pyFloatJSON(req.temperature), ToolChoice: orNull(req.toolChoice), Tools: req.tools, TopP: pyFloatJSON(req.topP),
		Background: req.background, MaxOutputTokens: req.maxOutputTokens, MaxToolCalls: orNull(req.maxToolCalls),
		PreviousResponseID: orNull(req.previousResponseID), Prompt: orNull(nil), Reasoning: orNull(req.reasoning),
		ServiceTier: req.serviceTier, Status: status, Text: orNull(req.text), TopLogprobs: orNull(nil),
		Truncation: req.truncation, Usage: u, User: orNull(req.user),
		InputMessages: orNull(nil), OutputMessages: orNull(nil),
	}
	if obj.Output == nil {
		obj.Output = []json.RawMessage{}
	}
	if obj.Tools == nil {
		obj.Tools = []json.RawMessage{}
	}
	if status == "incomplete" {
		obj.IncompleteDetails = &incompleteReason{Reason: "max_output_tokens"}
	}
	body, _ := marshalPlain(obj) // raw fields were validated JSON
	return body
}

// finalResponse builds the finished response object as
// responses_full_generator does, with fresh item ids, and keeps it when
// the request asked for the store and the replica has one.
func finalResponse(g *generation) []byte {
	q := g.seqs[0]
	status := "completed"
	if q.reason == "length" {
		status = "incomplete"
	}
	var output []json.RawMessage
	var texts []string
	if g.call != nil && g.call.ran {
		output = append(output, g.call.outputItem())
	}
	switch {
	case q.call == nil:
		if text := q.text(); text != "" {
			item, _ := marshalPlain(outputMessage{
				ID: "msg_" + randomHex(), Content: []outputText{{Annotations: []any{}, Text: text, Type: "output_text", Logprobs: nil}},
				Role: "assistant", Status: "completed", Type: "message",
			})
			output = append(output, item)
			texts = append(texts, text)
		}
	case g.spec.tools.mode == toolsRequired && q.reason == "length":
		// A cut-off list of calls does not parse: no call.
	default:
		var args strings.Builder
		for _, i := range q.tokens {
			args.WriteString(q.call.rawPiece(i))
		}
		item, _ := marshalPlain(functionCall{
			Arguments: args.String(), CallID: newToolCallID(ToolCallIDsVLLM), Name: q.call.name,
			Type: "function_call", ID: "fc_" + randomHex(), Status: "completed",
		})
		output = append(output, item)
	}
	outTokens := len(q.tokens) + g.callTokens
	u := &responseUsage{InputTokens: g.spec.promptTokens(), OutputTokens: outTokens, TotalTokens: g.spec.promptTokens() + outTokens}
	u.InputTokensDetails.CachedTokens = g.cached
	u.InputTokensDetails.InputTokensPerTurn = []int{}
	u.InputTokensDetails.CachedTokensPerTurn = []int{}
	u.OutputTokensDetails.OutputTokensPerTurn = []int{}
	u.OutputTokensDetails.ToolOutputTokensPerTurn = []int{}
	body := responseBody(g, status, output, u)
	if req := g.spec.responses; req != nil && req.store {
		g.s.responses.put(g, g.id, &storedResponse{body: body, messages: req.messages, outputTexts: texts})
	}
	return body
}

// outputMessage is ResponseOutputMessage; outputText ResponseOutputText.
type outputMessage struct {
	ID      string       `json:"id"`
	Content []outputText `json:"content"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Type    string       `json:"type"`
}

type outputText struct {
	Annotations []any           `json:"annotations"`
	Text        string          `json:"text"`
	Type        string          `json:"type"`
	Logprobs    json.RawMessage `json:"logprobs"`
}

// functionCall is ResponseFunctionToolCall.
type functionCall struct {
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	ID        string `json:"id"`
	Status    string `json:"status"`
}

// responsesFormat is the Responses endpoint's wire format.
type responsesFormat struct{}

func (responsesFormat) stream(g *generation) streamWire {
	return &responsesWire{g: g, buf: make([]byte, 0, 1024)}
}

func (responsesFormat) whole(g *generation) (int, []byte) { return http.StatusOK, finalResponse(g) }

func (responsesFormat) errorBody(s *Server, e apiError) []byte { return s.errorJSON(e) }

func (responsesFormat) garbageWhole(g *generation) []byte {
	return fmt.Appendf(nil, `{"id":%q,"created_at":%d,"incomplete_details":null,"instructions":null,"metadata":null,"model":%q,"object":"response","output":[{"id":"msg_%s","content":[{"annotations":[],"text":"`,
		g.id, g.created, g.s.cfg.Model, randomHex())
}

func (responsesFormat) oversizeWhole(g *generation) []byte {
	obj := responseObject{}
	_ = json.Unmarshal(responseBody(g, "incomplete", nil, nil), &obj)
	item, _ := marshalPlain(outputMessage{
		ID: "msg_" + randomHex(), Content: []outputText{{Annotations: []any{}, Text: strings.Repeat("x", oversizeBytes), Type: "output_text"}},
		Role: "assistant", Status: "completed", Type: "message",
	})
	body, _ := marshalPlain(obj)
	return bytes.Replace(body, []byte(`"output":[]`), append(append([]byte(`"output":[`), item...), ']'), 1)
}

// responsesWire streams a Responses reply as simple_streaming_events.py's
// process_simple_stream and responses_stream_generator emit it. Each
// event's JSON is the openai-python event model's model_dump_json(): its
// fields in the model's order, nulls included.
type responsesWire struct {
	g      *generation
	buf    []byte
	seq    int
	itemID string // the open output item's id: a uuid4 in hex, no prefix
	callID string // a streamed call's call_id: "call_" + hex
	acc    []byte // the open item's text or arguments so far, JSON-escaped
	kind   string // "text", "call" or "" before the first delta
	name   string
	index  int // the open item's output_index: 1 after an engine-run call (enginecall.go)
}

func (w *responsesWire) event(typ string) {
	w.buf = append(w.buf, "event: "...)
	w.buf = append(w.buf, typ...)
	w.buf = append(w.buf, "\ndata: "...)
}

// tail closes an event: its sequence number and type, the last two fields
// of every event model.
func (w *responsesWire) tail(typ string) {
	w.buf = append(w.buf, `,"sequence_number":`...)
	w.buf = strconv.AppendInt(w.buf, int64(w.seq), 10)
	w.buf = append(w.buf, `,"type":"`...)
	w.buf = append(w.buf, typ...)
	w.buf = append(w.buf, "\"}\n\n"...)
	w.seq++
}

func (w *responsesWire) responseEvent(typ string, body []byte) {
	w.event(typ)
	w.buf = append(w.buf, `{"response":`...)
	w.buf = append(w.buf, body...)
	w.tail(typ)
}

// preamble: response.created and response.in_progress, both with the
// initial response (status in_progress, no output, no usage).
func (w *responsesWire) preamble() {
	initial := responseBody(w.g, "in_progress", nil, nil)
	w.responseEvent("response.created", initial)
	w.responseEvent("response.in_progress", initial)
}

func (w *responsesWire) open([]*sequence) {}

func (w *responsesWire) text(_ *sequence, text []byte) {
	if len(text) == 0 {
		return
	}
	if w.kind == "" {
		w.kind, w.itemID = "text", randomHex()
		w.event("response.output_item.added")
		w.buf = append(w.buf, `{"item":{"id":"`...)
		w.buf = append(w.buf, w.itemID...)
		w.buf = append(w.buf, `","content":[],"role":"assistant","status":"in_progress","type":"message"},`...)
		w.index0()
		w.tail("response.output_item.added")
		w.event("response.content_part.added")
		w.buf = append(w.buf, `{"content_index":0,"item_id":"`...)
		w.buf = append(w.buf, w.itemID...)
		w.buf = append(w.buf, `",`...)
		w.index0()
		w.buf = append(w.buf, `,"part":{"annotations":[],"text":"","type":"output_text","logprobs":[]}`...)
		w.tail("response.content_part.added")
	}
	w.acc = append(w.acc, text...)
	w.event("response.output_text.delta")
	w.buf = append(w.buf, `{"content_index":0,"delta":"`...)
	w.buf = append(w.buf, text...)
	w.buf = append(w.buf, `","item_id":"`...)
	w.buf = append(w.buf, w.itemID...)
	w.buf = append(w.buf, `","logprobs":[],`...)
	w.index0()
	w.tail("response.output_text.delta")
}

// functionCallItem appends a function_call item as the stream shows it.
func (w *responsesWire) functionCallItem(args []byte, status string) {
	w.buf = append(w.buf, `{"item":{"arguments":"`...)
	w.buf = append(w.buf, args...)
	w.buf = append(w.buf, `","call_id":"`...)
	w.buf = append(w.buf, w.callID...)
	w.buf = append(w.buf, `","name":`...)
	w.buf = append(w.buf, jsonText(w.name)...)
	w.buf = append(w.buf, `,"type":"function_call","id":"`...)
	w.buf = append(w.buf, w.itemID...)
	w.buf = append(w.buf, `","status":"`...)
	w.buf = append(w.buf, status...)
	w.buf = append(w.buf, `"},`...)
	w.index0()
}

// toolStart: the call's first delta opens its item (with that delta's
// arguments) and is also sent as its first arguments delta.
func (w *responsesWire) toolStart(q *sequence, args []byte) {
	w.kind, w.itemID, w.callID, w.name = "call", randomHex(), "call_"+randomHex(), q.call.name
	w.event("response.output_item.added")
	w.functionCallItem(args, "in_progress")
	w.tail("response.output_item.added")
	w.toolArgs(q, args)
}

func (w *responsesWire) toolArgs(_ *sequence, args []byte) {
	if len(args) == 0 {
		return
	}
	w.acc = append(w.acc, args...)
	w.event("response.function_call_arguments.delta")
	w.buf = append(w.buf, `{"delta":"`...)
	w.buf = append(w.buf, args...)
	w.buf = append(w.buf, `","item_id":"`...)
	w.buf = append(w.buf, w.itemID...)
	w.buf = append(w.buf, `",`...)
	w.index0()
	w.tail("response.function_call_arguments.delta")
}

func (w *responsesWire) finish(*sequence) {}

// close ends the open item, then sends response.completed with the final
// response.
func (w *responsesWire) close(int) {
	switch w.kind {
	case "text":
		// ResponseTextDoneEvent's fields: text comes after sequence_number.
		w.event("response.output_text.done")
		w.buf = append(w.buf, `{"content_index":0,"item_id":"`...)
		w.buf = append(w.buf, w.itemID...)
		w.buf = append(w.buf, `","logprobs":[],`...)
		w.index0()
		w.buf = append(w.buf, `,"sequence_number":`...)
		w.buf = strconv.AppendInt(w.buf, int64(w.seq), 10)
		w.buf = append(w.buf, `,"text":"`...)
		w.buf = append(w.buf, w.acc...)
		w.buf = append(w.buf, `","type":"response.output_text.done"}`+"\n\n"...)
		w.seq++
		part := append([]byte(`{"annotations":[],"text":"`), w.acc...)
		part = append(part, `","type":"output_text","logprobs":null}`...)
		w.event("response.content_part.done")
		w.buf = append(w.buf, `{"content_index":0,"item_id":"`...)
		w.buf = append(w.buf, w.itemID...)
		w.buf = append(w.buf, `",`...)
		w.index0()
		w.buf = append(w.buf, `,"part":`...)
		w.buf = append(w.buf, part...)
		w.tail("response.content_part.done")
		// vLLM passes annotations and logprobs to ResponseOutputMessage,
		// which keeps them as extra fields after its own.
		w.event("response.output_item.done")
		w.buf = append(w.buf, `{"item":{"id":"`...)
		w.buf = append(w.buf, w.itemID...)
		w.buf = append(w.buf, `","content":[`...)
		w.buf = append(w.buf, part...)
		w.buf = append(w.buf, `],"role":"assistant","status":"completed","type":"message","annotations":[],"logprobs":[]},`...)
		w.index0()
		w.tail("response.output_item.done")
	case "call":
		w.event("response.function_call_arguments.done")
		w.buf = append(w.buf, `{"arguments":"`...)
		w.buf = append(w.buf, w.acc...)
		w.buf = append(w.buf, `","item_id":"`...)
		w.buf = append(w.buf, w.itemID...)
		w.buf = append(w.buf, `","name":`...)
		w.buf = append(w.buf, jsonText(w.name)...)
		w.buf = append(w.buf, `,`...)
		w.index0()
		w.tail("response.function_call_arguments.done")
		w.event("response.output_item.done")
		w.functionCallItem(w.acc, "completed")
		w.tail("response.output_item.done")
	}
	w.responseEvent("response.completed", finalResponse(w.g))
}

// failure: vLLM has no error event here; the server drops the connection.
func (w *responsesWire) failure(apiError, bool) bool { return true }

// heldFailure writes the Responses API's own error event (openai-python's
// ResponseErrorEvent: code, message, param, sequence_number, type), which
// vLLM never sends but OpenAI's API and its clients know: the one way a
// Responses stream can report a failure and stay open.
func (w *responsesWire) heldFailure(e apiError) {
	code := e.errType()
	if e.status >= 500 {
		code = "server_error"
	}
	w.event("error")
	w.buf = append(w.buf, `{"code":`...)
	w.buf = append(w.buf, jsonText(code)...)
	w.buf = append(w.buf, `,"message":`...)
	w.buf = append(w.buf, jsonText(e.message)...)
	w.buf = append(w.buf, `,"param":null`...)
	w.tail("error")
}

func (w *responsesWire) garbage() []byte {
	b := []byte("event: response.output_text.delta\ndata: ")
	return append(b, `{"content_index":0,"delta":"`+"\n\n"...)
}

func (w *responsesWire) oversize() []byte {
	b := []byte("event: response.output_text.delta\ndata: ")
	b = append(b, `{"content_index":0,"delta":"`...)
	b = append(b, bytes.Repeat([]byte("x"), oversizeBytes)...)
	b = append(b, `","item_id":"`...)
	b = append(b, randomHex()...)
	b = append(b, `","logprobs":[],"output_index":0,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(w.seq), 10)
	return append(b, `,"type":"response.output_text.delta"}`+"\n\n"...)
}

func (w *responsesWire) bytes() []byte { return w.buf }
func (w *responsesWire) reset()        { w.buf = w.buf[:0] }
