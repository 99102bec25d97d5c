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
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolCalls []any  `json:"tool_calls"` // always [], as vLLM sends without tool parsing
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
		completion += len(q.words)
	}
	u := usage{
		PromptTokens:     spec.promptTokens(),
		CompletionTokens: completion,
		TotalTokens:      spec.promptTokens() + completion,
	}
	if spec.endpoint == endpointChat {
		choices := make([]chatChoice, len(seqs))
		for i, q := range seqs {
			choices[i] = chatChoice{
				Index:        q.choice,
				Message:      chatMessage{Role: "assistant", Content: q.text(), ToolCalls: []any{}},
				FinishReason: q.reason,
			}
		}
		return chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: model, Usage: u, Choices: choices}
	}
	choices := make([]textChoice, len(seqs))
	for i, q := range seqs {
		choices[i] = textChoice{Index: q.choice, Text: q.text(), FinishReason: q.reason}
	}
	return textCompletion{ID: id, Object: "text_completion", Created: created, Model: model, Usage: u, Choices: choices}
}
