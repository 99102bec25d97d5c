package sim

import (
	"fmt"
	"strings"
	"testing"
)

// usageTrail renders every chunk's usage as "index:prompt/completion/total"
// ("-" for the usage chunk, "none" for a chunk without usage).
func usageTrail(t *testing.T, events []string) []string {
	t.Helper()
	var trail []string
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		c := decodeChunk(t, ev)
		who := "-"
		if len(c.Choices) == 1 {
			who = fmt.Sprint(c.Choices[0].Index)
		}
		if c.Usage == nil {
			trail = append(trail, who+":none")
			continue
		}
		trail = append(trail, fmt.Sprintf("%s:%d/%d/%d", who, c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.TotalTokens))
	}
	return trail
}

func TestContinuousUsageChat(t *testing.T) {
	s := startSim(t, Config{StreamInterval: 2})
	events := streamEvents(t, s, "/v1/chat/completions", chatRequest("usage", map[string]any{
		"n": 2, "max_tokens": 3, "ignore_eos": true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
	}), nil)
	p := len(tokenIDs(RenderChat([]Message{{Role: "user", Content: "usage"}}))) // 6
	// Roles carry the prompt and no completion; every later chunk counts
	// its own choice's tokens so far (chunks of 1 then 2 tokens); the usage
	// chunk sums the choices and counts the prompt once.
	want := []string{
		"0:6/0/6", "1:6/0/6",
		"0:6/1/7", "1:6/1/7",
		"0:6/3/9", "0:6/3/9", "1:6/3/9", "1:6/3/9", // last chunk and finish chunk of each
		"-:6/6/12",
	}
	if p != 6 {
		t.Fatalf("prompt has %d tokens; the expectations assume 6", p)
	}
	if got := usageTrail(t, events); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("usage\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

func TestContinuousUsageCompletionsPerPrompt(t *testing.T) {
	s := startSim(t, Config{})
	events := streamEvents(t, s, "/v1/completions", map[string]any{
		"model": "sim-model", "prompt": []string{"one two three", "four"}, "max_tokens": 2, "ignore_eos": true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
	}, nil)
	want := "0:3/1/4 1:1/1/2 0:3/2/5 0:3/2/5 1:1/2/3 1:1/2/3 -:4/4/8"
	if got := strings.Join(usageTrail(t, events), " "); got != want {
		t.Errorf("usage\n got %s\nwant %s", got, want)
	}
}

// Plain include_usage: vLLM's chat chunks leave usage out (they are dumped
// with exclude_unset and usage is never set); only the last chunk has it.
// continuous_usage_stats alone does nothing: vLLM requires include_usage.
func TestUsageOnlyWhereVLLMSendsIt(t *testing.T) {
	s := startSim(t, Config{})
	for _, opts := range []map[string]any{
		{"include_usage": true},
		{"include_usage": true, "continuous_usage_stats": false},
		{"continuous_usage_stats": true},
		{"include_usage": false, "continuous_usage_stats": true},
	} {
		events := streamEvents(t, s, "/v1/chat/completions", chatRequest("x", map[string]any{"max_tokens": 2, "stream_options": opts}), nil)
		trail := usageTrail(t, events)
		for _, u := range trail[:len(trail)-1] {
			if u != "0:none" {
				t.Errorf("%v: a choice chunk carries usage: %v", opts, trail)
			}
		}
		last := trail[len(trail)-1]
		if withUsage := opts["include_usage"] == true; withUsage != strings.HasPrefix(last, "-:") {
			t.Errorf("%v: last chunk %s", opts, last)
		}
		for _, ev := range events {
			if strings.Contains(ev, `"usage":null`) {
				t.Errorf("%v: usage:null in %s", opts, ev)
			}
		}
	}
}

func TestContinuousUsageMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	opts := map[string]any{"include_usage": true, "continuous_usage_stats": true}
	compareStream(t, "vllm_chat_stream_continuous_usage.sse", streamEvents(t, s, "/v1/chat/completions",
		chatRequest("x", map[string]any{"max_tokens": 2, "ignore_eos": true, "stream_options": opts}), nil))
	compareStream(t, "vllm_completions_stream_continuous_usage.sse", streamEvents(t, s, "/v1/completions",
		map[string]any{"model": "sim-model", "prompt": []string{"a b", "c"}, "max_tokens": 2, "ignore_eos": true, "stream_options": opts}, nil))
}
