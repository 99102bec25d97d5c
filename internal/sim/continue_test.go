package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// chatAnswer posts a chat body and returns the answer's content and finish reason.
func chatAnswer(t *testing.T, s *Server, body map[string]any) (string, string) {
	t.Helper()
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, body), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var resp struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message.Content, resp.Choices[0].FinishReason
}

func continueBody(partial string, extra map[string]any) map[string]any {
	body := map[string]any{
		"model": "sim-model",
		"messages": []map[string]any{
			{"role": "user", "content": "tell me"},
			{"role": "assistant", "content": partial},
		},
		"temperature": 0,
		"max_tokens":  100,
	}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

// A cut answer sent back as the final assistant message with continue_final_message and
// add_generation_prompt false is continued where it stopped: with greedy decoding the
// replica's own words go on exactly where the cut was, and end where the answer ended.
func TestContinueFinalMessageContinuesTheAnswer(t *testing.T) {
	s := startSim(t, Config{Name: "sim-1"})
	full, reason := chatAnswer(t, s, chatRequest("tell me", map[string]any{"temperature": 0, "max_tokens": 100}))
	if reason != "stop" || full == "" {
		t.Fatalf("full answer %q (%s)", full, reason)
	}
	// The reference: the sim's own tokens for the rendered conversation.
	prompt := RenderChat([]Message{{Role: "user", Content: "tell me"}})
	n := NaturalLength("sim-1", 0, prompt)
	tokens := Tokens("sim-1", 0, prompt, n)
	if strings.Join(tokens, "") != full {
		t.Fatalf("full answer %q, want %q", full, strings.Join(tokens, ""))
	}
	for _, cut := range []int{1, 3, n - 1} {
		partial := strings.Join(tokens[:cut], "")
		rest, reason := chatAnswer(t, s, continueBody(partial, map[string]any{"continue_final_message": true, "add_generation_prompt": false}))
		if partial+rest != full || reason != "stop" {
			t.Errorf("cut after %d tokens: continued with %q (%s), want %q", cut, rest, reason, strings.Join(tokens[cut:], ""))
		}
	}
}

// Only the replica's own words are its trajectory: another replica's answer, or text the
// model did not write, is a new prompt whose answer has nothing to do with the cut one.
func TestContinueFinalMessageOfOtherText(t *testing.T) {
	s := startSim(t, Config{Name: "sim-2"})
	prompt := RenderChat([]Message{{Role: "user", Content: "tell me"}})
	other := strings.Join(Tokens("sim-1", 0, prompt, 4), "")
	open := prompt + other
	want := Tokens("sim-2", 0, open, NaturalLength("sim-2", 0, open))
	rest, _ := chatAnswer(t, s, continueBody(other, map[string]any{"continue_final_message": true, "add_generation_prompt": false}))
	if rest != strings.Join(want, "") {
		t.Fatalf("continued %q, want the answer to the open prompt %q", rest, strings.Join(want, ""))
	}
}

// Without continue_final_message the final assistant message is a closed turn and the
// answer a new one; so it is on the Messages and Responses endpoints, which vLLM renders
// with the generation prompt whatever the conversation ends with.
func TestAssistantPrefillIsANewTurnWithoutContinue(t *testing.T) {
	s := startSim(t, Config{Name: "sim-1"})
	prompt := RenderChat([]Message{{Role: "user", Content: "tell me"}})
	partial := strings.Join(Tokens("sim-1", 0, prompt, 3), "")
	closed := RenderChat([]Message{{Role: "user", Content: "tell me"}, {Role: "assistant", Content: partial}})
	want := strings.Join(Tokens("sim-1", 0, closed, NaturalLength("sim-1", 0, closed)), "")
	if got, _ := chatAnswer(t, s, continueBody(partial, nil)); got != want {
		t.Fatalf("chat: %q, want a new turn %q", got, want)
	}
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/messages", jsonBody(t, map[string]any{
		"model": "sim-model", "max_tokens": 100, "temperature": 0,
		"messages": []map[string]any{{"role": "user", "content": "tell me"}, {"role": "assistant", "content": partial}},
	}), nil)
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &msg) != nil || len(msg.Content) == 0 || msg.Content[0].Text != want {
		t.Fatalf("messages: %d %s, want the text %q", status, b, want)
	}
}

// vLLM's refusals: the explicit pair is a validation error; continue_final_message alone
// leaves add_generation_prompt at true, which the chat template refuses.
func TestContinueFinalMessageNeedsGenerationPromptOff(t *testing.T) {
	s := startSim(t, Config{Name: "sim-1"})
	c := newClient(t)
	status, b := postJSON(t, c, s.URL()+"/v1/chat/completions",
		jsonBody(t, continueBody(" alpha", map[string]any{"continue_final_message": true, "add_generation_prompt": true})), nil)
	e := decodeError(t, b)
	if status != http.StatusBadRequest || e.Error.Type != "Bad Request" || e.Error.Param == nil || *e.Error.Param != "body" ||
		!strings.HasPrefix(e.Error.Message, "1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Cannot set both `continue_final_message` and `add_generation_prompt` to True.'") {
		t.Fatalf("both true: %d %s", status, b)
	}
	status, b = postJSON(t, c, s.URL()+"/v1/chat/completions",
		jsonBody(t, continueBody(" alpha", map[string]any{"continue_final_message": true})), nil)
	e = decodeError(t, b)
	if status != http.StatusBadRequest || e.Error.Type != "BadRequestError" || e.Error.Message != notCompatible+" "+notCompatible {
		t.Fatalf("add_generation_prompt left at its default: %d %s", status, b)
	}
}

// The cut follows transformers: the prompt ends with the final message's text, whose
// trailing whitespace stays only when the text has no leading whitespace (transformers
// compares the text found, from its first non-space character, with the whole message);
// /tokenize renders the same prompt.
func TestRenderContinued(t *testing.T) {
	for _, tc := range []struct{ final, want string }{
		{" alpha bravo", "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n alpha bravo"},
		{" alpha bravo  ", "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n alpha bravo"},
		{"alpha bravo  ", "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nalpha bravo  "},
		// An empty final message is found at the very end: nothing is cut.
		{"", "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"},
	} {
		got, _, refused := renderContinued([]Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: tc.final}})
		if refused != "" || got != tc.want {
			t.Errorf("final %q: %q (%s), want %q", tc.final, got, refused, tc.want)
		}
	}
	s := startSim(t, Config{Name: "sim-1"})
	status, b := postJSON(t, newClient(t), s.URL()+"/tokenize", jsonBody(t, map[string]any{
		"model": "sim-model", "continue_final_message": true, "add_generation_prompt": false,
		"messages": []map[string]any{{"role": "user", "content": "q"}, {"role": "assistant", "content": " alpha"}},
	}), nil)
	var tok struct{ Count int }
	if status != http.StatusOK || json.Unmarshal(b, &tok) != nil || tok.Count != len(tokenIDs("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n alpha")) {
		t.Fatalf("tokenize: %d %s", status, b)
	}
}
