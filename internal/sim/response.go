package sim

// Non-stream reply bodies, in vLLM's field order and with its null fields,
// so clients that are strict about vLLM's shape accept them.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// vLLM sends null unless --enable-prompt-tokens-details is set.
	PromptTokensDetails *struct{} `json:"prompt_tokens_details"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
	StopReason   *string     `json:"stop_reason"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []toolCallJSON `json:"tool_calls"` // [] when the answer is text, as vLLM sends
}

// toolCallJSON is vLLM's ToolCall: id, type, function in that order.
type toolCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type textCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "text_completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type textChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

// completionBody builds the non-stream reply of a finished generation, one
// choice per sequence in choice order.
func completionBody(spec *generationSpec, id string, created int64, model string, seqs []*sequence) any {
	completion := 0
	for _, q := range seqs {
		completion += len(q.tokens)
	}
	u := usage{
		PromptTokens:     spec.promptTokens(),
		CompletionTokens: completion,
		TotalTokens:      spec.promptTokens() + completion,
	}
	if spec.endpoint == endpointChat {
		choices := make([]chatChoice, len(seqs))
		for i, q := range seqs {
			msg := chatMessage{Role: "assistant", Content: q.text(), ToolCalls: []toolCallJSON{}}
			if q.call != nil {
				tc := toolCallJSON{ID: q.call.id, Type: "function"}
				tc.Function.Name = q.call.name
				// A call cut short by max_tokens keeps what was generated.
				for _, i := range q.tokens {
					tc.Function.Arguments += q.call.rawPiece(i)
				}
				msg.ToolCalls = append(msg.ToolCalls, tc)
			}
			choices[i] = chatChoice{Index: q.choice, Message: msg, FinishReason: q.finishReason(spec)}
		}
		return chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: model, Usage: u, Choices: choices}
	}
	choices := make([]textChoice, len(seqs))
	for i, q := range seqs {
		choices[i] = textChoice{Index: q.choice, Text: q.text(), FinishReason: q.finishReason(spec)}
	}
	return textCompletion{ID: id, Object: "text_completion", Created: created, Model: model, Usage: u, Choices: choices}
}
