package openai

import "fmt"

// anthropic checks an Anthropic Messages request: model, max_tokens (required
// there), messages with user and assistant turns whose content is a string or content
// blocks, an optional system prompt. The prompt is the system prompt and each turn's text.
func (in *intake) anthropic(body []byte) (*Request, *Error) {
	fields := in.members
	r := &Request{Endpoint: Messages, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}
	if _, ok := fields.present("max_tokens"); !ok {
		return nil, invalid("max_tokens", "missing_required_parameter", "max_tokens: Field required")
	}
	if r.MaxTokens, e = parsePositive(fields, "max_tokens"); e != nil {
		return nil, e
	}
	if raw, ok := fields.present("system"); ok && raw[0] != '"' && raw[0] != '[' {
		return nil, typeError("system", "a string or an array of text blocks", raw)
	}
	raw, ok := fields.present("messages")
	switch {
	case !ok:
		return nil, invalid("messages", "missing_required_parameter", "messages: Field required")
	case raw[0] != '[':
		return nil, typeError("messages", "an array", raw)
	case in.list.count == 0:
		return nil, invalid("messages", "empty_array", "messages: at least one message is required")
	case in.list.err != nil:
		return nil, in.list.err
	}
	if r.Stream, e = parseBool(fields, "stream"); e != nil {
		return nil, e
	}
	if e = parseTemperature(fields, 1); e != nil {
		return nil, e
	}
	return r, nil
}

// responses checks an OpenAI Responses request: model, input (a string or a list
// of items), optional instructions, max_output_tokens, previous_response_id, and tools (which
// of them an engine runs itself). The prompt is the instructions and the text of the input.
func (in *intake) responses(body []byte) (*Request, *Error) {
	fields := in.members
	r := &Request{Endpoint: Responses, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}
	if raw, ok := fields.present("instructions"); ok && raw[0] != '"' {
		return nil, typeError("instructions", "a string", raw)
	}
	raw, ok := fields.present("input")
	switch {
	case !ok:
		return nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	case raw[0] == '"':
	case raw[0] != '[':
		return nil, typeError("input", "a string or an array of input items", raw)
	case in.list.count == 0:
		return nil, invalid("input", "empty_array",
			"Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	case in.list.err != nil:
		return nil, in.list.err
	}
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
	if _, ok := fields.present("store"); ok {
		if r.Store, e = parseBool(fields, "store"); e != nil {
			return nil, e
		}
	}
	if id, present, ok := parseString(fields, "previous_response_id"); present {
		if !ok || id == "" {
			raw, _ := fields.present("previous_response_id")
			return nil, typeError("previous_response_id", "a non-empty string", raw)
		}
		r.PreviousResponseID = id
	}
	if r.EngineTools, e = parseResponsesTools(fields); e != nil {
		return nil, e
	}
	return r, nil
}

// embeddings checks an embeddings request: model and input (a string, strings,
// token ids, or arrays of token ids). Embeddings are never streamed.
func (in *intake) embeddings(body []byte) (*Request, *Error) {
	fields := in.members
	r := &Request{Endpoint: Embeddings, Body: body, N: 1, Choices: 1}
	var e *Error
	if r.Model, e = parseModel(fields); e != nil {
		return nil, e
	}
	if _, e = in.checkPrompts("input"); e != nil {
		return nil, e
	}
	if f, present, ok := parseString(fields, "encoding_format"); present && (!ok || f != "float" && f != "base64") {
		return nil, invalid("encoding_format", "invalid_value",
			"Invalid 'encoding_format': expected 'float' or 'base64'.")
	}
	if raw, ok := fields.present("stream"); ok {
		return nil, invalid("stream", "unsupported_parameter",
			fmt.Sprintf("Unsupported parameter: 'stream' (%s) is not supported with embeddings.", kindOf(raw)))
	}
	return r, nil
}
