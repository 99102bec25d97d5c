package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
)

// Endpoint names, as in Record.Endpoint.
const (
	endpointChat        = "chat"
	endpointCompletions = "completions"
)

// maxBodyBytes bounds a request body; real prompts are far smaller.
const maxBodyBytes = 32 << 20

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
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N         *int `json:"n"`
	IgnoreEOS bool `json:"ignore_eos"` // vLLM extension: run to max_tokens
}

// chatMessageIn is a chat message as clients send it: content is a string,
// null, or an array of parts of which the text parts are kept.
type chatMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// generationSpec is a validated request, reduced to what generation needs.
type generationSpec struct {
	endpoint     string
	prompt       string // rendered chat prompt or the completion prompt
	promptIDs    []uint32
	maxTokens    int
	seed         int64
	stream       bool
	includeUsage bool
	ignoreEOS    bool
}

// parseGeneration decodes and validates a request body as vLLM's OpenAI
// server does. The returned spec carries whatever was parsed (stream flag,
// prompt) even when the request is rejected, for the record.
func (s *Server) parseGeneration(endpoint string, body []byte) (generationSpec, *apiError) {
	spec := generationSpec{endpoint: endpoint}
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return spec, &apiError{status: http.StatusBadRequest, message: "JSON decode error: " + err.Error()}
	}
	spec.stream = req.Stream
	if req.Model == nil || *req.Model == "" {
		return spec, &apiError{status: http.StatusBadRequest, message: "Field required: model", param: "model"}
	}
	if *req.Model != s.cfg.Model {
		return spec, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", *req.Model), param: "model"}
	}
	prompt, perr := promptOf(endpoint, &req)
	if perr != nil {
		return spec, perr
	}
	spec.prompt = prompt
	spec.promptIDs = tokenIDs(prompt)
	if perr := s.checkSampling(&req, &spec); perr != nil {
		return spec, perr
	}
	return spec, nil
}

// promptOf returns the prompt text of a request: the rendered chat for the
// chat endpoint, the prompt string for completions.
func promptOf(endpoint string, req *completionRequest) (string, *apiError) {
	if endpoint == endpointChat {
		if len(req.Messages) == 0 {
			return "", &apiError{status: http.StatusBadRequest, message: "Field required: messages (a non-empty list)", param: "messages"}
		}
		msgs := make([]Message, len(req.Messages))
		for i, m := range req.Messages {
			text, err := contentText(m.Content)
			if err != nil {
				return "", &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("messages[%d].content: %v", i, err), param: "messages"}
			}
			msgs[i] = Message{Role: m.Role, Content: text}
		}
		return RenderChat(msgs), nil
	}
	prompt, err := completionPrompt(req.Prompt)
	if err != nil {
		return "", &apiError{status: http.StatusBadRequest, message: "prompt: " + err.Error(), param: "prompt"}
	}
	return prompt, nil
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

// completionPrompt accepts a prompt string or a list of exactly one string.
func completionPrompt(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Errorf("field required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		return "", fmt.Errorf("the sim takes a string or a list of one string")
	}
	return list[0], nil
}

// checkSampling validates n, max tokens, temperature and stream options and
// fills the matching spec fields.
func (s *Server) checkSampling(req *completionRequest, spec *generationSpec) *apiError {
	bad := func(param, format string, args ...any) *apiError {
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), param: param}
	}
	if req.N != nil && *req.N != 1 {
		return bad("n", "n must be 1 (the sim generates a single choice), got %d.", *req.N)
	}
	if req.Temperature != nil && *req.Temperature < 0 {
		return bad("temperature", "temperature must be non-negative, got %v.", *req.Temperature)
	}
	if req.StreamOptions != nil && !req.Stream {
		return bad("stream_options", "Stream options can only be defined when `stream=True`.")
	}
	promptLen := len(spec.promptIDs)
	if promptLen >= maxModelLen {
		return bad("", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", maxModelLen, promptLen)
	}
	maxTokens := req.MaxTokens // max_completion_tokens wins, as in vLLM
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	switch {
	case maxTokens == nil:
		spec.maxTokens = min(s.cfg.DefaultMaxTokens, maxModelLen-promptLen)
	case *maxTokens < 1:
		return bad("max_tokens", "max_tokens must be at least 1, got %d.", *maxTokens)
	case promptLen+*maxTokens > maxModelLen:
		return bad("", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			maxModelLen, promptLen+*maxTokens, promptLen, *maxTokens)
	default:
		spec.maxTokens = *maxTokens
	}
	switch {
	case req.Seed != nil:
		spec.seed = *req.Seed
	case req.Temperature != nil && *req.Temperature > 0:
		spec.seed = rand.Int64() // sampling without a seed: a different text each time
	}
	spec.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	spec.ignoreEOS = req.IgnoreEOS
	return nil
}
