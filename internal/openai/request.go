package openai

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
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
	// Prompt is the start of the input as text, for prefix affinity: its first bytes,
	// as many as Parse was asked to keep. The text is, for completions, the prompt
	// string, or the strings of an array joined with '\n' (empty for a prompt given as
	// token ids); for chat, one "role: content\n" line per message, content being the
	// string or the text parts of a content array joined with '\n'; for Messages and
	// Responses the same, after a "system: …\n" line for the system prompt or the
	// instructions.
	Prompt string
	// PromptOmitted is how many bytes of that text Prompt leaves out: the whole text is
	// len(Prompt)+PromptOmitted bytes long, which the cost estimate uses.
	PromptOmitted int
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

// DefaultPromptPrefix is how much of the prompt's text ParseRequest keeps in
// Request.Prompt.
const DefaultPromptPrefix = 64 << 10

// ParseRequest is Parse keeping DefaultPromptPrefix bytes of the prompt.
func ParseRequest(ep Endpoint, body []byte) (*Request, *Error) {
	r, _, e := Parse(ep, body, DefaultPromptPrefix)
	return r, e
}

// Parse validates a client's request body for ep and extracts what the gateway
// needs: the Request, whose Prompt keeps the first promptPrefix bytes of the
// prompt's text, and the body's top-level members. Errors have Status 400, type
// invalid_request_error, a message in OpenAI's style and Param naming the field at
// fault ("messages[2].role"). Checks run in a fixed order, so a body with several
// problems always reports the same one: first that the body is JSON as the gateway
// accepts it (checkBody), an object, with no key given twice; then the fields.
//
// The body is read once, front to back, and nothing of it is copied but the prompt's
// first bytes and the small fields (model, previous_response_id): the cost of a
// request grows with its body as little as the one pass allows (docs/design.md §9).
func Parse(ep Endpoint, body []byte, promptPrefix int) (*Request, Members, *Error) {
	return parse(&intake{s: scanner{b: body}, ep: ep}, promptPrefix)
}

// ReadRequest is Parse for a body of size bytes still to be read from r. The body is
// read into one buffer of its size as it is parsed, so that parsing goes on while the
// rest of the body arrives, and it is read to its end even when it is refused early:
// the checks keep their order. A read error (r's, or io.ErrUnexpectedEOF for a body
// shorter than size) is returned as it is; a refused request as an *Error.
func ReadRequest(ep Endpoint, r io.Reader, size, promptPrefix int) (*Request, Members, error) {
	src := &source{r: r, buf: make([]byte, size)}
	req, members, e := parse(&intake{s: scanner{b: src.buf[:0], src: src}, ep: ep}, promptPrefix)
	switch {
	case src.err != nil:
		return nil, nil, src.err
	case e != nil:
		return nil, nil, e
	}
	return req, members, nil
}

// parse scans the body of in and checks the request.
func parse(in *intake, promptPrefix int) (*Request, Members, *Error) {
	ep := in.ep
	in.system.limit, in.turns.limit = max(promptPrefix, 0), max(promptPrefix, 0)
	in.scan()
	if in.s.failed() {
		// The whole body decides which fault is reported.
		if in.s.src != nil {
			in.s.fill(len(in.s.src.buf))
		}
		body := in.s.b
		switch {
		case in.s.fail.kind == faultRead:
			return nil, nil, nil // the caller reports the read error
		case len(bytes.TrimSpace(body)) == 0:
			return nil, nil, invalid("", "invalid_json", "The request body is empty; expected a JSON object.")
		}
		return nil, nil, checkBody(body, in.s.fail)
	}
	body := in.s.b
	switch {
	case !in.object:
		return nil, nil, invalid("", "invalid_type",
			fmt.Sprintf("The request body must be a JSON object, but got %s instead.", kindOf(body)))
	case in.names.found:
		return nil, nil, duplicateKey(in.names.dup)
	}
	var r *Request
	var e *Error
	switch ep {
	case Chat, Completions:
		r, e = in.completion(body)
	case Messages:
		r, e = in.anthropic(body)
	case Responses:
		r, e = in.responses(body)
	case Embeddings:
		r, e = in.embeddings(body)
	default:
		return nil, nil, &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: "internal_error",
			Message: fmt.Sprintf("request parsing called for unknown %v", ep)}
	}
	if e != nil {
		return nil, nil, e
	}
	r.Prompt, r.PromptOmitted = render(promptPrefix, &in.system, &in.turns)
	return r, in.members, nil
}

// completion checks a chat or text completion request.
func (in *intake) completion(body []byte) (*Request, *Error) {
	ep, fields := in.ep, in.members
	r := &Request{Endpoint: ep, Body: body}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}

	prompts := 1
	switch ep {
	case Chat:
		if e = in.checkMessages(); e != nil {
			return nil, e
		}
	case Completions:
		if prompts, e = in.checkPrompts("prompt"); e != nil {
			return nil, e
		}
	}

	if r.Stream, e = parseBool(fields, "stream"); e != nil {
		return nil, e
	}
	r.N = 1
	if raw, ok := fields.present("n"); ok {
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
		n, e := parsePositive(fields, name)
		if e != nil {
			return nil, e
		}
		if n > 0 {
			r.MaxTokens = n // max_completion_tokens comes second and wins
		}
	}
	if e = parseTemperature(fields, 2); e != nil {
		return nil, e
	}
	if raw, ok := fields.present("stream_options"); ok {
		if !r.Stream {
			return nil, invalid("stream_options", "invalid_value",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		if raw[0] != '{' {
			return nil, typeError("stream_options", "an object", raw)
		}
		opts := objectMembers(raw)
		if r.IncludeUsage, e = parseBoolAs(opts, "include_usage", "stream_options.include_usage"); e != nil {
			return nil, e
		}
		if r.ContinuousUsage, e = parseBoolAs(opts, "continuous_usage_stats", "stream_options.continuous_usage_stats"); e != nil {
			return nil, e
		}
	}
	return r, nil
}

// checkMessages reports what is wrong with a chat request's messages.
func (in *intake) checkMessages() *Error {
	raw, ok := in.members.present("messages")
	switch {
	case !ok:
		return invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	case raw[0] != '[':
		return typeError("messages", "an array", raw)
	case in.list.count == 0:
		return invalid("messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	return in.list.err
}

// checkPrompts checks a completions prompt or an embeddings input (name): a string,
// an array of strings, an array of token ids or an array of such arrays. It returns
// the number of prompts: each string of an array, and each token-id array of an
// array of arrays, is a prompt of its own with its own choices.
func (in *intake) checkPrompts(name string) (int, *Error) {
	raw, ok := in.members.present(name)
	if !ok {
		return 0, invalid(name, "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s'.", name))
	}
	const want = "a string, an array of strings, or an array of token ids"
	switch {
	case raw[0] == '"':
		return 1, nil
	case raw[0] != '[':
		return 0, typeError(name, want, raw)
	case in.list.count == 0:
		return 0, invalid(name, "empty_array",
			fmt.Sprintf("Invalid '%s': empty array. Expected a non-empty prompt, but got an empty array instead.", name))
	case in.list.strs:
		return in.list.count, nil
	case in.list.ints:
		return 1, nil
	case in.list.batches:
		return in.list.count, nil
	}
	return 0, typeError(name, want, raw)
}

// objectMembers lists the members of an object the scanner accepted (a small one:
// stream_options), keeping the last of a key given twice, as a map decoding does.
func objectMembers(raw []byte) Members {
	s := scanner{b: raw}
	ms := make(Members, 0, 4) // stream_options' two members, a tool's few: one allocation
	s.open()
	for s.nextMember(s.i == 1) {
		name := keyString(s.key, s.keyLen)
		from := s.value()
		v := raw[from:s.i]
		if i := ms.index(name); i >= 0 {
			ms[i].Value = v
			continue
		}
		ms = append(ms, Member{Name: name, Value: v})
	}
	return ms
}

// parseModel reads the required "model".
func parseModel(fields Members) (string, *Error) {
	model, ok := fields.Get("model")
	if !ok || isNull(model) || string(model) == `""` {
		return "", invalid("model", "missing_required_parameter", "you must provide a model parameter")
	}
	if model[0] != '"' {
		return "", typeError("model", "a string", model)
	}
	return unquote(model), nil
}

// parseBool reads an optional boolean member.
func parseBool(fields Members, name string) (bool, *Error) { return parseBoolAs(fields, name, name) }

// parseBoolAs reads an optional boolean member, named param in an error.
func parseBoolAs(fields Members, name, param string) (bool, *Error) {
	raw, ok := fields.present(name)
	if !ok {
		return false, nil
	}
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, typeError(param, "a boolean", raw)
}

// parseString reads an optional string member; ok is false when it is not a string.
func parseString(fields Members, name string) (s string, present, ok bool) {
	raw, present := fields.present(name)
	if !present {
		return "", false, true
	}
	if raw[0] != '"' {
		return "", true, false
	}
	return unquote(raw), true, true
}

// parsePositive reads an optional positive integer member (0 when absent).
func parsePositive(fields Members, name string) (int, *Error) {
	raw, ok := fields.present(name)
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
func parseTemperature(fields Members, hi float64) *Error {
	raw, ok := fields.present("temperature")
	if !ok {
		return nil
	}
	if kindOf(raw) != "a number" {
		return typeError("temperature", "a number", raw)
	}
	t, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return typeError("temperature", "a number", raw)
	}
	if t < 0 || t > hi {
		return invalid("temperature", "invalid_value",
			fmt.Sprintf("Invalid 'temperature': expected a number between 0 and %g, but got %s instead.", hi, raw))
	}
	return nil
}

// integer reads a JSON number with no fractional part (3 and 3.0 both).
func integer(raw []byte) (int64, bool) {
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
