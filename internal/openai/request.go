package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Endpoint is the OpenAI API a request was sent to.
type Endpoint uint8

const (
	// Chat is POST /v1/chat/completions.
	Chat Endpoint = iota + 1
	// Completions is POST /v1/completions.
	Completions
	// Messages is POST /v1/messages, the Anthropic Messages API.
	Messages
	// Responses is POST /v1/responses, the OpenAI Responses API.
	Responses
	// Embeddings is POST /v1/embeddings.
	Embeddings
)

// String returns the endpoint's short name.
func (ep Endpoint) String() string {
	switch ep {
	case Chat:
		return "chat"
	case Completions:
		return "completions"
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	case Embeddings:
		return "embeddings"
	}
	return "endpoint(" + strconv.Itoa(int(ep)) + ")"
}

// Path returns the endpoint's URL path, the same on the gateway and on engines.
func (ep Endpoint) Path() string {
	switch ep {
	case Chat:
		return "/v1/chat/completions"
	case Completions:
		return "/v1/completions"
	case Messages:
		return "/v1/messages"
	case Responses:
		return "/v1/responses"
	case Embeddings:
		return "/v1/embeddings"
	}
	return ""
}

// Request is what the gateway needs to know about a client's request. The
// body itself goes to the engine unchanged: fields fencegate does not know
// (engine extensions) are neither rejected nor dropped.
type Request struct {
	Endpoint     Endpoint
	Model        string
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	// ContinuousUsage is stream_options.continuous_usage_stats (vLLM, SGLang): usage in
	// every chunk.
	ContinuousUsage bool
	MaxTokens       int // max_completion_tokens, else max_tokens; 0 when unset
	// N is the number of choices per prompt (n, default 1); Choices the number of choices
	// of the answer: N times the prompts of a completions prompt array.
	N       int
	Choices int
	// PreviousResponseID is a Responses request's previous_response_id: the state it
	// continues lives on the replica that produced that response.
	PreviousResponseID string
	// Store is a Responses request's store (default true): whether the engine keeps the
	// response for a later previous_response_id.
	Store bool
	// EngineTools are the tools the engine runs itself (a Responses request's mcp,
	// code_interpreter, web_search_preview, ...): such a request may have acted once its body
	// may have reached an engine (docs/design.md §5).
	EngineTools EngineTools
	// Prompt is the input as text, for prefix affinity and cost estimates.
	// Completions: the prompt string, or the strings of an array joined with
	// '\n' (empty for a prompt given as token ids). Chat: one "role: content\n"
	// line per message, content being the string or the text parts of a
	// content array joined with '\n'.
	Prompt string
	// Body is the original body (not a copy), forwarded to the engine as is.
	Body []byte
}

// Limits on the choices of one request: n as OpenAI bounds it, and the choices of a
// completions prompt array, which multiply (a gateway must not let one request fan out
// without bound).
const (
	MaxN       = 128
	MaxChoices = 1024
)

// ParseRequest validates a client's request body for ep and extracts what
// the gateway needs. Errors have Status 400, type invalid_request_error, a
// message in OpenAI's style and Param naming the field at fault
// ("messages[2].role"). Checks run in a fixed order, so a body with several
// problems always reports the same one.
func ParseRequest(ep Endpoint, body []byte) (*Request, *Error) {
	fields, e := parseObject(body)
	if e != nil {
		return nil, e
	}
	switch ep {
	case Messages:
		return parseMessages(fields, body)
	case Responses:
		return parseResponses(fields, body)
	case Embeddings:
		return parseEmbeddings(fields, body)
	case Chat, Completions:
	default:
		return nil, &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: "internal_error",
			Message: fmt.Sprintf("request parsing called for unknown %v", ep)}
	}
	r := &Request{Endpoint: ep, Body: body}

	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}

	prompts := 1
	switch ep {
	case Chat:
		if r.Prompt, e = renderMessages(fields["messages"]); e != nil {
			return nil, e
		}
	case Completions:
		if r.Prompt, prompts, e = renderPrompt(fields["prompt"]); e != nil {
			return nil, e
		}
	}

	if raw, ok := present(fields, "stream"); ok {
		if err := json.Unmarshal(raw, &r.Stream); err != nil {
			return nil, typeError("stream", "a boolean", raw)
		}
	}
	r.N = 1
	if raw, ok := present(fields, "n"); ok {
		n, isInt := integer(raw)
		switch {
		case !isInt:
			return nil, typeError("n", "an integer", raw)
		case n > MaxN:
			return nil, invalid("n", "invalid_value",
				fmt.Sprintf("Invalid 'n': expected a value of at most %d, but got %d instead.", MaxN, n))
		case n < 1:
			return nil, invalid("n", "invalid_value",
				fmt.Sprintf("Invalid 'n': expected a value of at least 1, but got %d instead.", n))
		}
		r.N = int(n)
	}
	r.Choices = r.N * prompts
	if r.Choices > MaxChoices {
		return nil, invalid("n", "invalid_value",
			fmt.Sprintf("Invalid 'n': %d choices for each of %d prompts is %d choices, more than the limit of %d.", r.N, prompts, r.Choices, MaxChoices))
	}
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		raw, ok := present(fields, name)
		if !ok {
			continue
		}
		n, isInt := integer(raw)
		if !isInt {
			return nil, typeError(name, "an integer", raw)
		}
		if n < 1 {
			return nil, invalid(name, "invalid_value",
				fmt.Sprintf("Invalid '%s': expected a positive integer, but got %d instead.", name, n))
		}
		if n > math.MaxInt32 {
			return nil, invalid(name, "invalid_value",
				fmt.Sprintf("Invalid '%s': %d is too large.", name, n))
		}
		r.MaxTokens = int(n) // max_completion_tokens comes second and wins
	}
	if raw, ok := present(fields, "temperature"); ok {
		var t float64
		if kindOf(raw) != "a number" || json.Unmarshal(raw, &t) != nil {
			return nil, typeError("temperature", "a number", raw)
		}
		if t < 0 || t > 2 {
			return nil, invalid("temperature", "invalid_value",
				fmt.Sprintf("Invalid 'temperature': expected a number between 0 and 2, but got %s instead.", bytes.TrimSpace(raw)))
		}
	}
	if raw, ok := present(fields, "stream_options"); ok {
		if !r.Stream {
			return nil, invalid("stream_options", "invalid_value",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		var opts map[string]json.RawMessage
		if kindOf(raw) != "an object" || json.Unmarshal(raw, &opts) != nil {
			return nil, typeError("stream_options", "an object", raw)
		}
		if raw, ok := present(opts, "include_usage"); ok {
			if err := json.Unmarshal(raw, &r.IncludeUsage); err != nil {
				return nil, typeError("stream_options.include_usage", "a boolean", raw)
			}
		}
		if raw, ok := present(opts, "continuous_usage_stats"); ok {
			if err := json.Unmarshal(raw, &r.ContinuousUsage); err != nil {
				return nil, typeError("stream_options.continuous_usage_stats", "a boolean", raw)
			}
		}
	}
	return r, nil
}

// parseModel reads the required "model".
func parseModel(fields map[string]json.RawMessage) (string, *Error) {
	model, ok := fields["model"]
	if !ok || isNull(model) || string(bytes.TrimSpace(model)) == `""` {
		return "", invalid("model", "missing_required_parameter", "you must provide a model parameter")
	}
	var m string
	if err := json.Unmarshal(model, &m); err != nil {
		return "", typeError("model", "a string", model)
	}
	return m, nil
}

// parseBool reads an optional boolean member.
func parseBool(fields map[string]json.RawMessage, name string) (bool, *Error) {
	raw, ok := present(fields, name)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, typeError(name, "a boolean", raw)
	}
	return b, nil
}

// parsePositive reads an optional positive integer member (0 when absent).
func parsePositive(fields map[string]json.RawMessage, name string) (int, *Error) {
	raw, ok := present(fields, name)
	if !ok {
		return 0, nil
	}
	n, isInt := integer(raw)
	switch {
	case !isInt:
		return 0, typeError(name, "an integer", raw)
	case n < 1:
		return 0, invalid(name, "invalid_value",
			fmt.Sprintf("Invalid '%s': expected a positive integer, but got %d instead.", name, n))
	case n > math.MaxInt32:
		return 0, invalid(name, "invalid_value", fmt.Sprintf("Invalid '%s': %d is too large.", name, n))
	}
	return int(n), nil
}

// parseTemperature checks an optional temperature between 0 and hi.
func parseTemperature(fields map[string]json.RawMessage, hi float64) *Error {
	raw, ok := present(fields, "temperature")
	if !ok {
		return nil
	}
	var t float64
	if kindOf(raw) != "a number" || json.Unmarshal(raw, &t) != nil {
		return typeError("temperature", "a number", raw)
	}
	if t < 0 || t > hi {
		return invalid("temperature", "invalid_value",
			fmt.Sprintf("Invalid 'temperature': expected a number between 0 and %g, but got %s instead.", hi, bytes.TrimSpace(raw)))
	}
	return nil
}

// parseObject decodes the top level of the body, telling malformed JSON
// apart from JSON that is not an object.
func parseObject(body []byte) (map[string]json.RawMessage, *Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, invalid("", "invalid_json", "The request body is empty; expected a JSON object.")
	}
	if e := checkBody(body); e != nil {
		return nil, e
	}
	var fields map[string]json.RawMessage
	err := json.Unmarshal(body, &fields)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax) || (err != nil && !json.Valid(body)):
		return nil, invalid("", "invalid_json",
			fmt.Sprintf("We could not parse the JSON body of your request: %v.", err))
	case err != nil || fields == nil:
		return nil, invalid("", "invalid_type",
			fmt.Sprintf("The request body must be a JSON object, but got %s instead.", kindOf(body)))
	}
	if e := checkTopLevelKeys(body); e != nil {
		return nil, e
	}
	return fields, nil
}

// renderMessages validates chat messages and renders them as the Prompt.
func renderMessages(raw json.RawMessage) (string, *Error) {
	if raw == nil || isNull(raw) {
		return "", invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	var messages []json.RawMessage
	if kindOf(raw) != "an array" || json.Unmarshal(raw, &messages) != nil {
		return "", typeError("messages", "an array", raw)
	}
	if len(messages) == 0 {
		return "", invalid("messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	var b strings.Builder
	for i, m := range messages {
		param := fmt.Sprintf("messages[%d]", i)
		var msg map[string]json.RawMessage
		if kindOf(m) != "an object" || json.Unmarshal(m, &msg) != nil {
			return "", typeError(param, "an object", m)
		}
		role, ok := present(msg, "role")
		if !ok {
			return "", invalid(param+".role", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.role'.", param))
		}
		var roleName string
		if err := json.Unmarshal(role, &roleName); err != nil {
			return "", typeError(param+".role", "a string", role)
		}
		b.WriteString(roleName)
		b.WriteString(": ")
		writeContent(&b, msg["content"])
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// writeContent writes a message's content: a string, or the text parts of a
// content array. Other shapes are left to the engine to judge.
func writeContent(b *strings.Builder, raw json.RawMessage) {
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

// renderPrompt validates a completions prompt: a string, an array of
// strings, an array of token ids or an array of such arrays. It also returns
// the number of prompts: each string of an array, and each token-id array of
// an array of arrays, is a prompt of its own with its own choices.
func renderPrompt(raw json.RawMessage) (string, int, *Error) {
	if raw == nil || isNull(raw) {
		return "", 0, invalid("prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
	}
	const want = "a string, an array of strings, or an array of token ids"
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 1, nil
	}
	var items []json.RawMessage
	if kindOf(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return "", 0, typeError("prompt", want, raw)
	}
	if len(items) == 0 {
		return "", 0, invalid("prompt", "empty_array",
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
	return "", 0, typeError("prompt", want, raw)
}

// present returns a member that is there and not null: optional fields
// sent as null count as unset, as they do for OpenAI.
func present(fields map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

// integer reads a JSON number with no fractional part (3 and 3.0 both).
func integer(raw json.RawMessage) (int64, bool) {
	if kindOf(raw) != "a number" {
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

// kindOf names the JSON type of a value for messages: "a string", "a
// number", "a boolean", "an object", "an array" or "null".
func kindOf(raw []byte) string {
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

func invalid(param, code, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: code, Message: message}
}

func typeError(param, want string, got []byte) *Error {
	return invalid(param, "invalid_type",
		fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, want, kindOf(got)))
}
