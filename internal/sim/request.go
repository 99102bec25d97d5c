package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
)

// Endpoint names, as in Record.Endpoint.
const (
	endpointChat        = "chat"        // POST /v1/chat/completions
	endpointCompletions = "completions" // POST /v1/completions
	endpointMessages    = "messages"    // POST /v1/messages, the Anthropic Messages API
	endpointResponses   = "responses"   // POST /v1/responses, the OpenAI Responses API
	endpointEmbeddings  = "embeddings"  // POST /v1/embeddings
)

// maxBodyBytes bounds a request body; real prompts are far smaller.
const maxBodyBytes = 32 << 20

// maxSequences bounds prompts × n in one request. vLLM has no such limit,
// but every sequence costs the sim memory and a test that sends n = 10⁹
// should get an error, not exhaust the test process.
const maxSequences = 1024

// completionRequest holds the fields of an OpenAI chat or text completion
// request that the sim honours; unknown fields are ignored, as vLLM does.
type completionRequest struct {
	Model               *string         `json:"model"`
	Messages            []chatMessageIn `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	Seed                *int64          `json:"seed"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"` // vLLM extension
	} `json:"stream_options"`
	N          *int            `json:"n"`
	IgnoreEOS  bool            `json:"ignore_eos"` // vLLM extension: run to max_tokens
	Tools      []toolParam     `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	// The chat template's options (vLLM extensions of the chat request): whether the
	// prompt ends with the assistant's header (default true), or leaves the final
	// message open for the model to continue (continue.go).
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	ContinueFinalMessage bool  `json:"continue_final_message"`
}

// chatMessageIn is a chat message as clients send it: content is a string,
// null, or an array of parts of which the text parts are kept.
type chatMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// promptSpec is one prompt of a request: the chat endpoint has exactly one,
// a completion request one per element of a prompt array.
type promptSpec struct {
	key       string   // what the output text is keyed on: the prompt text, or TokenPrompt(ids)
	ids       []uint32 // prompt token ids
	maxTokens int      // output tokens allowed to each of its n sequences
	// open is the final message a chat with continue_final_message leaves open.
	open *openTurn
}

// generationSpec is a validated request, reduced to what generation needs.
type generationSpec struct {
	endpoint     string
	prompts      []promptSpec
	n            int // sequences per prompt; choice index = prompt index × n + j
	seed         int64
	stream       bool
	includeUsage bool // the usage chunk before [DONE]
	// continuousUsage adds usage to every choice chunk; vLLM honours
	// continuous_usage_stats only together with include_usage.
	continuousUsage bool
	ignoreEOS       bool
	tools           toolChoice // chat, Messages and Responses: whether and how the choices call a tool

	responses *responsesRequest // the Responses API request, echoed in its response object
	engine    *enginePlan       // the call of an engine-run tool the request makes (Responses, with tool servers)
	embed     embedOptions      // the embeddings request's encoding
}

// promptTokens is the usage.prompt_tokens of the request: vLLM sums the
// prompts of a completion request and counts a chat prompt once, however
// many choices share it.
func (s *generationSpec) promptTokens() int {
	n := 0
	for _, p := range s.prompts {
		n += len(p.ids)
	}
	return n
}

// sequences is the number of output sequences, prompts × n.
func (s *generationSpec) sequences() int { return len(s.prompts) * s.n }

// parseRequest decodes and validates a request body of endpoint.
func (s *Server) parseRequest(endpoint string, body []byte) (generationSpec, *apiError) {
	switch endpoint {
	case endpointMessages:
		return s.parseMessages(body)
	case endpointResponses:
		return s.parseResponses(body)
	case endpointEmbeddings:
		return s.parseEmbeddings(body)
	}
	return s.parseGeneration(endpoint, body)
}

// parseGeneration decodes and validates a request body as vLLM's OpenAI
// server does. The returned spec carries whatever was parsed (stream flag,
// prompts) even when the request is rejected, for the record.
func (s *Server) parseGeneration(endpoint string, body []byte) (generationSpec, *apiError) {
	spec := generationSpec{endpoint: endpoint, n: 1}
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return spec, &apiError{status: http.StatusBadRequest, message: "JSON decode error: " + err.Error()}
	}
	spec.stream = req.Stream
	if req.ContinueFinalMessage && req.AddGenerationPrompt != nil && *req.AddGenerationPrompt {
		// ChatCompletionRequest.check_generation_prompt, a model validator that runs
		// before any field is validated.
		var v validationErrors
		v.valueError(bytes.TrimSpace(body), cannotSetBoth, "body")
		return spec, v.err()
	}
	if req.Model == nil || *req.Model == "" {
		return spec, &apiError{status: http.StatusBadRequest, message: "Field required: model", param: "model"}
	}
	if *req.Model != s.cfg.Model {
		return spec, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", *req.Model), param: "model"}
	}
	prompts, perr := promptsOf(endpoint, &req)
	if perr != nil {
		return spec, perr
	}
	spec.prompts = prompts
	if endpoint == endpointChat {
		tools, perr := parseToolChoice(req.Tools, req.ToolChoice)
		if perr != nil {
			return spec, perr
		}
		spec.tools = tools
	}
	if perr := s.checkSampling(&req, &spec); perr != nil {
		return spec, perr
	}
	return spec, nil
}

// promptsOf returns the prompts of a request: the rendered chat for the chat
// endpoint, the prompt or prompt array for completions.
func promptsOf(endpoint string, req *completionRequest) ([]promptSpec, *apiError) {
	if endpoint == endpointChat {
		prompt, open, err := chatPrompt(req)
		if err != nil {
			return nil, err
		}
		return []promptSpec{{key: prompt, ids: tokenIDs(prompt), open: open}}, nil
	}
	prompts, err := completionPrompts(req.Prompt)
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, message: "prompt: " + err.Error(), param: "prompt"}
	}
	return prompts, nil
}

// chatPrompt renders a chat request's messages with the chat template, with the
// generation prompt unless the request turns it off, or with the final message left open
// (continue_final_message). open is that final message.
func chatPrompt(req *completionRequest) (prompt string, open *openTurn, e *apiError) {
	if len(req.Messages) == 0 {
		return "", nil, &apiError{status: http.StatusBadRequest, message: "Field required: messages (a non-empty list)", param: "messages"}
	}
	msgs := make([]Message, len(req.Messages))
	for i, m := range req.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			return "", nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("messages[%d].content: %v", i, err), param: "messages"}
		}
		msgs[i] = Message{Role: m.Role, Content: text}
	}
	addGenerationPrompt := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	if !req.ContinueFinalMessage {
		return renderChat(msgs, addGenerationPrompt), nil, nil
	}
	if addGenerationPrompt {
		// transformers refuses the pair; vLLM wraps its ValueError in its own and answers
		// with both ("{e} {e.__cause__}").
		return "", nil, &apiError{status: http.StatusBadRequest, message: notCompatible + " " + notCompatible}
	}
	prompt, open, refused := renderContinued(msgs)
	if refused != "" {
		return "", nil, &apiError{status: http.StatusBadRequest, message: refused + " " + refused}
	}
	return prompt, open, nil
}

// contentText flattens a chat message's content to text, joining text parts
// with newlines as vLLM does for text-only models.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
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
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// vocabSize is the number of token ids the sim's tokenizer can produce;
// a prompt given as token ids may use no other.
const vocabSize = firstWordID + wordIDSpace

// completionPrompts accepts the prompt forms of vLLM's CompletionRequest:
// a string, an array of strings, an array of token ids (one prompt) or an
// array of token-id arrays.
func completionPrompts(raw json.RawMessage) ([]promptSpec, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("field required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return []promptSpec{{key: text, ids: tokenIDs(text)}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("want a string, a list of strings, a list of token ids or a list of lists of token ids")
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("must not be an empty list")
	}
	// A list whose first element is a number is one prompt of token ids.
	if first := bytes.TrimSpace(items[0]); len(first) > 0 && first[0] != '"' && first[0] != '[' {
		ids, err := promptIDs(raw)
		if err != nil {
			return nil, err
		}
		return []promptSpec{tokenPromptSpec(ids)}, nil
	}
	prompts := make([]promptSpec, 0, len(items))
	for i, item := range items {
		var s string
		if err := json.Unmarshal(item, &s); err == nil {
			prompts = append(prompts, promptSpec{key: s, ids: tokenIDs(s)})
			continue
		}
		ids, err := promptIDs(item)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		prompts = append(prompts, tokenPromptSpec(ids))
	}
	return prompts, nil
}

// promptIDs decodes a non-empty array of token ids within the vocabulary.
func promptIDs(raw json.RawMessage) ([]uint32, error) {
	var ints []int64
	if err := json.Unmarshal(raw, &ints); err != nil {
		return nil, fmt.Errorf("want a string or a list of token ids")
	}
	if len(ints) == 0 {
		return nil, fmt.Errorf("a list of token ids must not be empty")
	}
	ids := make([]uint32, len(ints))
	for i, v := range ints {
		if v < 0 || v >= vocabSize {
			// vLLM's input processor: "Token id N is out of vocabulary".
			return nil, fmt.Errorf("Token id %d is out of vocabulary", v)
		}
		ids[i] = uint32(v)
	}
	return ids, nil
}

func tokenPromptSpec(ids []uint32) promptSpec {
	ints := make([]int, len(ids))
	for i, id := range ids {
		ints[i] = int(id)
	}
	return promptSpec{key: TokenPrompt(ints), ids: ids}
}

// TokenPrompt returns the prompt string a replica keys its output on when a
// completion prompt is given as token ids: pass it to Tokens and
// NaturalLength to predict the reply. The sim's tokenizer cannot turn ids
// back into text, so a token-id prompt is its own key, distinct from every
// text prompt (it starts with a byte no text prompt of the sim's tests has).
func TokenPrompt(ids []int) string {
	var b strings.Builder
	b.WriteString("\x00token-ids:")
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}

// checkSampling validates n, max tokens, temperature and stream options and
// fills the matching spec fields.
func (s *Server) checkSampling(req *completionRequest, spec *generationSpec) *apiError {
	bad := func(param, format string, args ...any) *apiError {
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), param: param}
	}
	if req.N != nil {
		// vLLM's SamplingParams: "n must be at least 1, got 0."
		if *req.N < 1 {
			return bad("n", "n must be at least 1, got %d.", *req.N)
		}
		if *req.N*len(spec.prompts) > maxSequences {
			return bad("n", "n × prompts must be at most %d in the sim, got %d × %d.", maxSequences, *req.N, len(spec.prompts))
		}
		spec.n = *req.N
	}
	if req.Temperature != nil && *req.Temperature < 0 {
		return bad("temperature", "temperature must be non-negative, got %v.", *req.Temperature)
	}
	if req.StreamOptions != nil && !req.Stream {
		return bad("stream_options", "Stream options can only be defined when `stream=True`.")
	}
	maxTokens := req.MaxTokens // max_completion_tokens wins, as in vLLM
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	if maxTokens != nil && *maxTokens < 1 {
		return bad("max_tokens", "max_tokens must be at least 1, got %d.", *maxTokens)
	}
	// vLLM checks every prompt of a request on its own.
	for i := range spec.prompts {
		p := &spec.prompts[i]
		if e := s.checkContext(len(p.ids), maxTokens); e != nil {
			return e
		}
		if maxTokens != nil {
			p.maxTokens = *maxTokens
		} else {
			p.maxTokens = min(s.cfg.DefaultMaxTokens, s.cfg.MaxModelLen-len(p.ids))
		}
	}
	switch {
	case req.Seed != nil:
		spec.seed = *req.Seed
	case req.Temperature != nil && *req.Temperature > 0:
		spec.seed = rand.Int64() // sampling without a seed: a different text each time
	}
	spec.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	spec.continuousUsage = spec.includeUsage && req.StreamOptions.ContinuousUsageStats
	spec.ignoreEOS = req.IgnoreEOS
	return nil
}

// checkContext rejects a prompt of promptLen tokens that, with maxTokens
// (nil: unset), does not fit the context window, in vLLM's words.
func (s *Server) checkContext(promptLen int, maxTokens *int) *apiError {
	limit := s.cfg.MaxModelLen
	if s.cfg.LegacyErrors {
		return legacyContextError(limit, promptLen, maxTokens)
	}
	requested := 0
	if maxTokens != nil {
		requested = *maxTokens
	}
	if promptLen+requested > limit {
		// vLLM's renderer tokenizes at most limit-requested+1 tokens, so the
		// count it reports is a lower bound ("at least") once the prompt is
		// over; the message ends with VLLMValidationError's parameter and
		// value, and param names the offending input.
		shown := promptLen
		if room := limit - requested + 1; room > 0 && room < shown {
			shown = room
		}
		return &apiError{
			status: http.StatusBadRequest,
			message: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d output tokens and your prompt contains at least %d input tokens, for a total of at least %d tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=%d)",
				limit, requested, shown, shown+requested, shown),
			param: "input_tokens",
		}
	}
	if maxTokens == nil && promptLen == limit {
		// The prompt fits but leaves no room for the one token every
		// request generates: vLLM's input processor rejects it.
		return &apiError{
			status: http.StatusBadRequest,
			message: fmt.Sprintf("The decoder prompt (length %d) plus the number of requested output tokens (at least 1) is longer than the maximum model length of %d. Make sure that `max_model_len` is no smaller than the number of text tokens (prompt + requested output tokens).",
				promptLen, limit),
		}
	}
	return nil
}

// legacyContextError is checkContext in the words of the older vLLM
// releases whose flat error bodies Config.LegacyErrors selects.
func legacyContextError(limit, promptLen int, maxTokens *int) *apiError {
	if promptLen >= limit {
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, promptLen)}
	}
	if maxTokens != nil && promptLen+*maxTokens > limit {
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			limit, promptLen+*maxTokens, promptLen, *maxTokens)}
	}
	return nil
}
