package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// parseMessages validates an Anthropic Messages request: model, max_tokens (required
// there), messages with user and assistant turns whose content is a string or content
// blocks, an optional system prompt. The Prompt is the system prompt and each turn's text.
func parseMessages(fields map[string]json.RawMessage, body []byte) (*Request, *Error) {
	r := &Request{Endpoint: Messages, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}
	if _, ok := present(fields, "max_tokens"); !ok {
		return nil, invalid("max_tokens", "missing_required_parameter", "max_tokens: Field required")
	}
	if r.MaxTokens, e = parsePositive(fields, "max_tokens"); e != nil {
		return nil, e
	}
	var b strings.Builder
	if raw, ok := present(fields, "system"); ok {
		if k := kindOf(raw); k != "a string" && k != "an array" {
			return nil, typeError("system", "a string or an array of text blocks", raw)
		}
		b.WriteString("system: ")
		writeContent(&b, raw)
		b.WriteByte('\n')
	}
	raw, ok := present(fields, "messages")
	if !ok {
		return nil, invalid("messages", "missing_required_parameter", "messages: Field required")
	}
	var turns []json.RawMessage
	if kindOf(raw) != "an array" || json.Unmarshal(raw, &turns) != nil {
		return nil, typeError("messages", "an array", raw)
	}
	if len(turns) == 0 {
		return nil, invalid("messages", "empty_array", "messages: at least one message is required")
	}
	for i, t := range turns {
		param := fmt.Sprintf("messages[%d]", i)
		var msg map[string]json.RawMessage
		if kindOf(t) != "an object" || json.Unmarshal(t, &msg) != nil {
			return nil, typeError(param, "an object", t)
		}
		var role string
		if rr, ok := present(msg, "role"); !ok || json.Unmarshal(rr, &role) != nil || (role != "user" && role != "assistant") {
			return nil, invalid(param+".role", "invalid_value",
				fmt.Sprintf("%s.role: Input should be 'user' or 'assistant'", param))
		}
		content, ok := present(msg, "content")
		if !ok {
			return nil, invalid(param+".content", "missing_required_parameter", param+".content: Field required")
		}
		if k := kindOf(content); k != "a string" && k != "an array" {
			return nil, typeError(param+".content", "a string or an array of content blocks", content)
		}
		b.WriteString(role)
		b.WriteString(": ")
		writeContent(&b, content)
		b.WriteByte('\n')
	}
	r.Prompt = b.String()
	if r.Stream, e = parseBool(fields, "stream"); e != nil {
		return nil, e
	}
	if e = parseTemperature(fields, 1); e != nil {
		return nil, e
	}
	return r, nil
}

// parseResponses validates an OpenAI Responses request: model, input (a string or a list
// of items), optional instructions, max_output_tokens, previous_response_id, and tools (which
// of them an engine runs itself). The Prompt is the instructions and the text of the input.
func parseResponses(fields map[string]json.RawMessage, body []byte) (*Request, *Error) {
	r := &Request{Endpoint: Responses, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}
	var b strings.Builder
	if raw, ok := present(fields, "instructions"); ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, typeError("instructions", "a string", raw)
		}
		b.WriteString("system: ")
		b.WriteString(s)
		b.WriteByte('\n')
	}
	raw, ok := present(fields, "input")
	if !ok {
		return nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	var s string
	switch {
	case json.Unmarshal(raw, &s) == nil:
		b.WriteString("user: ")
		b.WriteString(s)
		b.WriteByte('\n')
	case kindOf(raw) == "an array":
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil, typeError("input", "a string or an array of input items", raw)
		}
		if len(items) == 0 {
			return nil, invalid("input", "empty_array",
				"Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
		}
		for i, it := range items {
			var item map[string]json.RawMessage
			if kindOf(it) != "an object" || json.Unmarshal(it, &item) != nil {
				return nil, typeError(fmt.Sprintf("input[%d]", i), "an object", it)
			}
			var role string
			json.Unmarshal(item["role"], &role)
			if role == "" {
				json.Unmarshal(item["type"], &role)
			}
			b.WriteString(role)
			b.WriteString(": ")
			writeContent(&b, item["content"])
			b.WriteByte('\n')
		}
	default:
		return nil, typeError("input", "a string or an array of input items", raw)
	}
	r.Prompt = b.String()
	if r.MaxTokens, e = parsePositive(fields, "max_output_tokens"); e != nil {
		return nil, e
	}
	if r.Stream, e = parseBool(fields, "stream"); e != nil {
		return nil, e
	}
	if e = parseTemperature(fields, 2); e != nil {
		return nil, e
	}
	r.Store = true
	if raw, ok := present(fields, "store"); ok {
		if json.Unmarshal(raw, &r.Store) != nil {
			return nil, typeError("store", "a boolean", raw)
		}
	}
	if raw, ok := present(fields, "previous_response_id"); ok {
		if json.Unmarshal(raw, &r.PreviousResponseID) != nil || r.PreviousResponseID == "" {
			return nil, typeError("previous_response_id", "a non-empty string", raw)
		}
	}
	if r.EngineTools, e = parseResponsesTools(fields); e != nil {
		return nil, e
	}
	return r, nil
}

// parseEmbeddings validates an embeddings request: model and input (a string, strings,
// token ids, or arrays of token ids). Embeddings are never streamed.
func parseEmbeddings(fields map[string]json.RawMessage, body []byte) (*Request, *Error) {
	r := &Request{Endpoint: Embeddings, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}
	raw, ok := present(fields, "input")
	if !ok {
		return nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	prompt, _, e := renderPrompt(raw)
	if e != nil {
		e.Param = "input"
		e.Message = strings.ReplaceAll(e.Message, "'prompt'", "'input'")
		return nil, e
	}
	r.Prompt = prompt
	if raw, ok := present(fields, "encoding_format"); ok {
		var f string
		if json.Unmarshal(raw, &f) != nil || (f != "float" && f != "base64") {
			return nil, invalid("encoding_format", "invalid_value",
				"Invalid 'encoding_format': expected 'float' or 'base64'.")
		}
	}
	if raw, ok := present(fields, "stream"); ok {
		return nil, invalid("stream", "unsupported_parameter",
			fmt.Sprintf("Unsupported parameter: 'stream' (%s) is not supported with embeddings.", kindOf(raw)))
	}
	return r, nil
}
