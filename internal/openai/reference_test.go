package openai

// The request parser as it was before the single-pass scanner: encoding/json decoding
// into maps of json.RawMessage, kept as the reference the scanner is compared with
// (differential_test.go). Only the duplicate key check changed; see
// refCheckTopLevelKeys.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fencegate/fencegate/internal/enginetool"
)

// refParseRequest validates a client's request body for ep and extracts what
// the gateway needs. Errors have Status 400, type invalid_request_error, a
// message in OpenAI's style and Param naming the field at fault
// ("messages[2].role"). Checks run in a fixed order, so a body with several
// problems always reports the same one.
func refParseRequest(ep Endpoint, body []byte) (*Request, *Error) {
	fields, e := refParseObject(body)
	if e != nil {
		return nil, e
	}
	switch ep {
	case Messages:
		return refParseMessages(fields, body)
	case Responses:
		return refParseResponses(fields, body)
	case Embeddings:
		return refParseEmbeddings(fields, body)
	case Chat, Completions:
	default:
		return nil, &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: "internal_error",
			Message: fmt.Sprintf("request parsing called for unknown %v", ep)}
	}
	r := &Request{Endpoint: ep, Body: body}

	if r.Model, e = refParseModel(fields); e != nil {
		return nil, e
	}

	prompts := 1
	switch ep {
	case Chat:
		if r.Prompt, e = refRenderMessages(fields["messages"]); e != nil {
			return nil, e
		}
	case Completions:
		if r.Prompt, prompts, e = refRenderPrompt(fields["prompt"]); e != nil {
			return nil, e
		}
	}

	if raw, ok := refPresent(fields, "stream"); ok {
		if err := json.Unmarshal(raw, &r.Stream); err != nil {
			return nil, refTypeError("stream", "a boolean", raw)
		}
	}
	r.N = 1
	if raw, ok := refPresent(fields, "n"); ok {
		n, isInt := refInteger(raw)
		switch {
		case !isInt:
			return nil, refTypeError("n", "an integer", raw)
		case n > MaxN:
			return nil, refInvalid("n", "invalid_value",
				fmt.Sprintf("Invalid 'n': expected a value of at most %d, but got %d instead.", MaxN, n))
		case n < 1:
			return nil, refInvalid("n", "invalid_value",
				fmt.Sprintf("Invalid 'n': expected a value of at least 1, but got %d instead.", n))
		}
		r.N = int(n)
	}
	r.Choices = r.N * prompts
	if r.Choices > MaxChoices {
		return nil, refInvalid("n", "invalid_value",
			fmt.Sprintf("Invalid 'n': %d choices for each of %d prompts is %d choices, more than the limit of %d.", r.N, prompts, r.Choices, MaxChoices))
	}
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		raw, ok := refPresent(fields, name)
		if !ok {
			continue
		}
		n, isInt := refInteger(raw)
		if !isInt {
			return nil, refTypeError(name, "an integer", raw)
		}
		if n < 1 {
			return nil, refInvalid(name, "invalid_value",
				fmt.Sprintf("Invalid '%s': expected a positive integer, but got %d instead.", name, n))
		}
		if n > math.MaxInt32 {
			return nil, refInvalid(name, "invalid_value",
				fmt.Sprintf("Invalid '%s': %d is too large.", name, n))
		}
		r.MaxTokens = int(n) // max_completion_tokens comes second and wins
	}
	if raw, ok := refPresent(fields, "temperature"); ok {
		var t float64
		if refKindOf(raw) != "a number" || json.Unmarshal(raw, &t) != nil {
			return nil, refTypeError("temperature", "a number", raw)
		}
		if t < 0 || t > 2 {
			return nil, refInvalid("temperature", "invalid_value",
				fmt.Sprintf("Invalid 'temperature': expected a number between 0 and 2, but got %s instead.", bytes.TrimSpace(raw)))
		}
	}
	if raw, ok := refPresent(fields, "stream_options"); ok {
		if !r.Stream {
			return nil, refInvalid("stream_options", "invalid_value",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		var opts map[string]json.RawMessage
		if refKindOf(raw) != "an object" || json.Unmarshal(raw, &opts) != nil {
			return nil, refTypeError("stream_options", "an object", raw)
		}
		if raw, ok := refPresent(opts, "include_usage"); ok {
			if err := json.Unmarshal(raw, &r.IncludeUsage); err != nil {
				return nil, refTypeError("stream_options.include_usage", "a boolean", raw)
			}
		}
		if raw, ok := refPresent(opts, "continuous_usage_stats"); ok {
			if err := json.Unmarshal(raw, &r.ContinuousUsage); err != nil {
				return nil, refTypeError("stream_options.continuous_usage_stats", "a boolean", raw)
			}
		}
	}
	return r, nil
}

// refParseModel reads the required "model".
func refParseModel(fields map[string]json.RawMessage) (string, *Error) {
	model, ok := fields["model"]
	if !ok || isNull(model) || string(bytes.TrimSpace(model)) == `""` {
		return "", refInvalid("model", "missing_required_parameter", "you must provide a model parameter")
	}
	var m string
	if err := json.Unmarshal(model, &m); err != nil {
		return "", refTypeError("model", "a string", model)
	}
	return m, nil
}

// refParseBool reads an optional boolean member.
func refParseBool(fields map[string]json.RawMessage, name string) (bool, *Error) {
	raw, ok := refPresent(fields, name)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, refTypeError(name, "a boolean", raw)
	}
	return b, nil
}

// refParsePositive reads an optional positive integer member (0 when absent).
func refParsePositive(fields map[string]json.RawMessage, name string) (int, *Error) {
	raw, ok := refPresent(fields, name)
	if !ok {
		return 0, nil
	}
	n, isInt := refInteger(raw)
	switch {
	case !isInt:
		return 0, refTypeError(name, "an integer", raw)
	case n < 1:
		return 0, refInvalid(name, "invalid_value",
			fmt.Sprintf("Invalid '%s': expected a positive integer, but got %d instead.", name, n))
	case n > math.MaxInt32:
		return 0, refInvalid(name, "invalid_value", fmt.Sprintf("Invalid '%s': %d is too large.", name, n))
	}
	return int(n), nil
}

// refParseTemperature checks an optional temperature between 0 and hi.
func refParseTemperature(fields map[string]json.RawMessage, hi float64) *Error {
	raw, ok := refPresent(fields, "temperature")
	if !ok {
		return nil
	}
	var t float64
	if refKindOf(raw) != "a number" || json.Unmarshal(raw, &t) != nil {
		return refTypeError("temperature", "a number", raw)
	}
	if t < 0 || t > hi {
		return refInvalid("temperature", "invalid_value",
			fmt.Sprintf("Invalid 'temperature': expected a number between 0 and %g, but got %s instead.", hi, bytes.TrimSpace(raw)))
	}
	return nil
}

// refParseObject decodes the top level of the body, telling malformed JSON
// apart from JSON that is not an object.
func refParseObject(body []byte) (map[string]json.RawMessage, *Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, refInvalid("", "invalid_json", "The request body is empty; expected a JSON object.")
	}
	if e := refCheckBody(body); e != nil {
		return nil, e
	}
	var fields map[string]json.RawMessage
	err := json.Unmarshal(body, &fields)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax) || (err != nil && !json.Valid(body)):
		return nil, refInvalid("", "invalid_json",
			fmt.Sprintf("We could not parse the JSON body of your request: %v.", err))
	case err != nil || fields == nil:
		return nil, refInvalid("", "invalid_type",
			fmt.Sprintf("The request body must be a JSON object, but got %s instead.", refKindOf(body)))
	}
	if e := refCheckTopLevelKeys(body); e != nil {
		return nil, e
	}
	return fields, nil
}

// refRenderMessages validates chat messages and renders them as the Prompt.
func refRenderMessages(raw json.RawMessage) (string, *Error) {
	if raw == nil || isNull(raw) {
		return "", refInvalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	var messages []json.RawMessage
	if refKindOf(raw) != "an array" || json.Unmarshal(raw, &messages) != nil {
		return "", refTypeError("messages", "an array", raw)
	}
	if len(messages) == 0 {
		return "", refInvalid("messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	var b strings.Builder
	for i, m := range messages {
		param := fmt.Sprintf("messages[%d]", i)
		var msg map[string]json.RawMessage
		if refKindOf(m) != "an object" || json.Unmarshal(m, &msg) != nil {
			return "", refTypeError(param, "an object", m)
		}
		role, ok := refPresent(msg, "role")
		if !ok {
			return "", refInvalid(param+".role", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.role'.", param))
		}
		var roleName string
		if err := json.Unmarshal(role, &roleName); err != nil {
			return "", refTypeError(param+".role", "a string", role)
		}
		b.WriteString(roleName)
		b.WriteString(": ")
		refWriteContent(&b, msg["content"])
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// refWriteContent writes a message's content: a string, or the text parts of a
// content array. Other shapes are left to the engine to judge.
func refWriteContent(b *strings.Builder, raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.WriteString(s)
		return
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return
	}
	first := true
	for _, p := range parts {
		// "text" (chat, Messages), "input_text" and "output_text" (Responses).
		if p.Text == nil || (p.Type != "text" && p.Type != "" && p.Type != "input_text" && p.Type != "output_text") {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		b.WriteString(*p.Text)
		first = false
	}
}

// refRenderPrompt validates a completions prompt: a string, an array of
// strings, an array of token ids or an array of such arrays. It also returns
// the number of prompts: each string of an array, and each token-id array of
// an array of arrays, is a prompt of its own with its own choices.
func refRenderPrompt(raw json.RawMessage) (string, int, *Error) {
	if raw == nil || isNull(raw) {
		return "", 0, refInvalid("prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
	}
	const want = "a string, an array of strings, or an array of token ids"
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 1, nil
	}
	var items []json.RawMessage
	if refKindOf(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return "", 0, refTypeError("prompt", want, raw)
	}
	if len(items) == 0 {
		return "", 0, refInvalid("prompt", "empty_array",
			"Invalid 'prompt': empty array. Expected a non-empty prompt, but got an empty array instead.")
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		return strings.Join(strs, "\n"), len(strs), nil
	}
	var tokens []int64
	if json.Unmarshal(raw, &tokens) == nil {
		return "", 1, nil
	}
	var batches [][]int64
	if json.Unmarshal(raw, &batches) == nil {
		return "", len(batches), nil
	}
	return "", 0, refTypeError("prompt", want, raw)
}

// refPresent returns a member that is there and not null: optional fields
// sent as null count as unset, as they do for OpenAI.
func refPresent(fields map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

// refInteger reads a JSON number with no fractional part (3 and 3.0 both).
func refInteger(raw json.RawMessage) (int64, bool) {
	if refKindOf(raw) != "a number" {
		return 0, false
	}
	text := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// refKindOf names the JSON type of a value for messages: "a string", "a
// number", "a boolean", "an object", "an array" or "null".
func refKindOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func refInvalid(param, code, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: code, Message: message}
}

func refTypeError(param, want string, got []byte) *Error {
	return refInvalid(param, "invalid_type",
		fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, want, refKindOf(got)))
}

// refParseMessages validates an Anthropic Messages request: model, max_tokens (required
// there), messages with user and assistant turns whose content is a string or content
// blocks, an optional system prompt. The Prompt is the system prompt and each turn's text.
func refParseMessages(fields map[string]json.RawMessage, body []byte) (*Request, *Error) {
	r := &Request{Endpoint: Messages, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = refParseModel(fields); e != nil {
		return nil, e
	}
	if _, ok := refPresent(fields, "max_tokens"); !ok {
		return nil, refInvalid("max_tokens", "missing_required_parameter", "max_tokens: Field required")
	}
	if r.MaxTokens, e = refParsePositive(fields, "max_tokens"); e != nil {
		return nil, e
	}
	var b strings.Builder
	if raw, ok := refPresent(fields, "system"); ok {
		if k := refKindOf(raw); k != "a string" && k != "an array" {
			return nil, refTypeError("system", "a string or an array of text blocks", raw)
		}
		b.WriteString("system: ")
		refWriteContent(&b, raw)
		b.WriteByte('\n')
	}
	raw, ok := refPresent(fields, "messages")
	if !ok {
		return nil, refInvalid("messages", "missing_required_parameter", "messages: Field required")
	}
	var turns []json.RawMessage
	if refKindOf(raw) != "an array" || json.Unmarshal(raw, &turns) != nil {
		return nil, refTypeError("messages", "an array", raw)
	}
	if len(turns) == 0 {
		return nil, refInvalid("messages", "empty_array", "messages: at least one message is required")
	}
	for i, t := range turns {
		param := fmt.Sprintf("messages[%d]", i)
		var msg map[string]json.RawMessage
		if refKindOf(t) != "an object" || json.Unmarshal(t, &msg) != nil {
			return nil, refTypeError(param, "an object", t)
		}
		var role string
		if rr, ok := refPresent(msg, "role"); !ok || json.Unmarshal(rr, &role) != nil || (role != "user" && role != "assistant") {
			return nil, refInvalid(param+".role", "invalid_value",
				fmt.Sprintf("%s.role: Input should be 'user' or 'assistant'", param))
		}
		content, ok := refPresent(msg, "content")
		if !ok {
			return nil, refInvalid(param+".content", "missing_required_parameter", param+".content: Field required")
		}
		if k := refKindOf(content); k != "a string" && k != "an array" {
			return nil, refTypeError(param+".content", "a string or an array of content blocks", content)
		}
		b.WriteString(role)
		b.WriteString(": ")
		refWriteContent(&b, content)
		b.WriteByte('\n')
	}
	r.Prompt = b.String()
	if r.Stream, e = refParseBool(fields, "stream"); e != nil {
		return nil, e
	}
	if e = refParseTemperature(fields, 1); e != nil {
		return nil, e
	}
	return r, nil
}

// refParseResponses validates an OpenAI Responses request: model, input (a string or a list
// of items), optional instructions, max_output_tokens, previous_response_id. The Prompt is
// the instructions and the text of the input.
func refParseResponses(fields map[string]json.RawMessage, body []byte) (*Request, *Error) {
	r := &Request{Endpoint: Responses, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = refParseModel(fields); e != nil {
		return nil, e
	}
	var b strings.Builder
	if raw, ok := refPresent(fields, "instructions"); ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, refTypeError("instructions", "a string", raw)
		}
		b.WriteString("system: ")
		b.WriteString(s)
		b.WriteByte('\n')
	}
	raw, ok := refPresent(fields, "input")
	if !ok {
		return nil, refInvalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	var s string
	switch {
	case json.Unmarshal(raw, &s) == nil:
		b.WriteString("user: ")
		b.WriteString(s)
		b.WriteByte('\n')
	case refKindOf(raw) == "an array":
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil, refTypeError("input", "a string or an array of input items", raw)
		}
		if len(items) == 0 {
			return nil, refInvalid("input", "empty_array",
				"Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
		}
		for i, it := range items {
			var item map[string]json.RawMessage
			if refKindOf(it) != "an object" || json.Unmarshal(it, &item) != nil {
				return nil, refTypeError(fmt.Sprintf("input[%d]", i), "an object", it)
			}
			var role string
			json.Unmarshal(item["role"], &role)
			if role == "" {
				json.Unmarshal(item["type"], &role)
			}
			b.WriteString(role)
			b.WriteString(": ")
			refWriteContent(&b, item["content"])
			b.WriteByte('\n')
		}
	default:
		return nil, refTypeError("input", "a string or an array of input items", raw)
	}
	r.Prompt = b.String()
	if r.MaxTokens, e = refParsePositive(fields, "max_output_tokens"); e != nil {
		return nil, e
	}
	if r.Stream, e = refParseBool(fields, "stream"); e != nil {
		return nil, e
	}
	if e = refParseTemperature(fields, 2); e != nil {
		return nil, e
	}
	r.Store = true
	if raw, ok := refPresent(fields, "store"); ok {
		if json.Unmarshal(raw, &r.Store) != nil {
			return nil, refTypeError("store", "a boolean", raw)
		}
	}
	if raw, ok := refPresent(fields, "previous_response_id"); ok {
		if json.Unmarshal(raw, &r.PreviousResponseID) != nil || r.PreviousResponseID == "" {
			return nil, refTypeError("previous_response_id", "a non-empty string", raw)
		}
	}
	if r.EngineTools, e = refParseResponsesTools(fields); e != nil {
		return nil, e
	}
	return r, nil
}

// refParseEmbeddings validates an embeddings request: model and input (a string, strings,
// token ids, or arrays of token ids). Embeddings are never streamed.
func refParseEmbeddings(fields map[string]json.RawMessage, body []byte) (*Request, *Error) {
	r := &Request{Endpoint: Embeddings, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = refParseModel(fields); e != nil {
		return nil, e
	}
	raw, ok := refPresent(fields, "input")
	if !ok {
		return nil, refInvalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	prompt, _, e := refRenderPrompt(raw)
	if e != nil {
		e.Param = "input"
		e.Message = strings.ReplaceAll(e.Message, "'prompt'", "'input'")
		return nil, e
	}
	r.Prompt = prompt
	if raw, ok := refPresent(fields, "encoding_format"); ok {
		var f string
		if json.Unmarshal(raw, &f) != nil || (f != "float" && f != "base64") {
			return nil, refInvalid("encoding_format", "invalid_value",
				"Invalid 'encoding_format': expected 'float' or 'base64'.")
		}
	}
	if raw, ok := refPresent(fields, "stream"); ok {
		return nil, refInvalid("stream", "unsupported_parameter",
			fmt.Sprintf("Unsupported parameter: 'stream' (%s) is not supported with embeddings.", refKindOf(raw)))
	}
	return r, nil
}

// refCheckBody refuses, before decoding, what a JSON decoder would accept but no engine should
// get: bytes that are not UTF-8 (Go's decoder would replace them silently, Python's refuses
// them), nesting deeper than MaxDepth, and a key given twice at the top level, where the
// gateway reads model, stream and the token limits: parsers disagree on which of two
// values wins, and the gateway must route and limit by the value the engine will use.
func refCheckBody(body []byte) *Error {
	if !utf8.Valid(body) {
		return refInvalid("", "invalid_json", "We could not parse the JSON body of your request: it is not valid UTF-8.")
	}
	if refDepth(body) > MaxDepth {
		return refInvalid("", "invalid_json",
			fmt.Sprintf("We could not parse the JSON body of your request: it nests arrays and objects deeper than %d levels.", MaxDepth))
	}
	return nil
}

// refCheckTopLevelKeys refuses an object that names a member twice; body is a valid
// object. It differs from the check it replaced on purpose: that one compared keys as
// gjson decodes them, which reads a lone surrogate escape together with the escape
// after it ("\ud800\u0041" and "\ud800\u0042" both became U+FFFD); keys are now
// compared as encoding/json decodes them, as the fields themselves are read.
func refCheckTopLevelKeys(body []byte) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.Token() // {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		name := tok.(string)
		if seen[name] {
			return refInvalid(name, "invalid_json", fmt.Sprintf("We could not parse the JSON body of your request: the key '%s' appears twice.", name))
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			panic(err)
		}
	}
	return nil
}

// refDepth is the deepest nesting of arrays and objects in a JSON text, outside strings.
func refDepth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			d++
			deepest = max(deepest, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return deepest
}

// refParseResponsesTools is the tools check as the map-decoding parser made it; it
// validates a Responses request's tools (an array of objects, each with
// a string type; an mcp tool with a string server_label, as OpenAI requires) and finds the
// ones an engine runs. The gateway must know who runs each tool, so a tools member it
// cannot read is refused rather than forwarded.
func refParseResponsesTools(fields map[string]json.RawMessage) (EngineTools, *Error) {
	var et EngineTools
	raw, ok := refPresent(fields, "tools")
	if !ok {
		return et, nil
	}
	var items []json.RawMessage
	if refKindOf(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return et, refTypeError("tools", "an array of tool objects", raw)
	}
	et.onlyMCP = true
	for i, it := range items {
		param := fmt.Sprintf("tools[%d]", i)
		var tool map[string]json.RawMessage
		if refKindOf(it) != "an object" || json.Unmarshal(it, &tool) != nil {
			return et, refTypeError(param, "an object", it)
		}
		typRaw, ok := refPresent(tool, "type")
		if !ok {
			return et, refInvalid(param+".type", "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.type'.", param))
		}
		var typ, environment, execution string
		if json.Unmarshal(typRaw, &typ) != nil {
			return et, refTypeError(param+".type", "a string", typRaw)
		}
		if env, ok := refPresent(tool, "environment"); ok {
			var e struct {
				Type string `json:"type"`
			}
			if refKindOf(env) != "an object" || json.Unmarshal(env, &e) != nil {
				return et, refTypeError(param+".environment", "an object", env)
			}
			environment = e.Type
		}
		if ex, ok := refPresent(tool, "execution"); ok && json.Unmarshal(ex, &execution) != nil {
			return et, refTypeError(param+".execution", "a string", ex)
		}
		if !enginetool.EngineRun(typ, environment, execution) {
			continue
		}
		if !slices.Contains(et.Types, typ) {
			et.Types = append(et.Types, typ)
		}
		if typ != "mcp" {
			et.onlyMCP = false
			continue
		}
		raw, ok := refPresent(tool, "server_label")
		if !ok {
			return et, refInvalid(param+".server_label", "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.server_label'.", param))
		}
		var label string
		if json.Unmarshal(raw, &label) != nil || label == "" {
			return et, refTypeError(param+".server_label", "a non-empty string", raw)
		}
		if !slices.Contains(et.MCPLabels, label) {
			et.MCPLabels = append(et.MCPLabels, label)
		}
	}
	if !et.Any() {
		et.onlyMCP = false
	}
	return et, nil
}
