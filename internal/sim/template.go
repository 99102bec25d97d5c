package sim

import "strings"

// Message is one chat message as the sim's chat template sees it: the text
// parts of an OpenAI content array are joined before rendering.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// RenderChat renders messages with the sim's chat template (ChatML-like,
// with the generation prompt appended, as vLLM does by default):
//
//	<|im_start|>user
//	Hello<|im_end|>
//	<|im_start|>assistant
//
// The result is the prompt the chat endpoint tokenizes, caches and hashes
// into its output; pass it to Tokens to predict a chat reply.
func RenderChat(messages []Message) string { return renderChat(messages, true) }

// renderChat renders messages, with the generation prompt when
// addGenerationPrompt is set (chat requests; embedding chat requests leave
// it off by default).
func renderChat(messages []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range messages {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}
