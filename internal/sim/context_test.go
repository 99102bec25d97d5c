package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestMaxModelLenRejectsAsVLLM(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 32})
	c := newClient(t)
	words := func(n int) string { return strings.TrimSpace(strings.Repeat("w ", n)) }
	msg := func(requested, shown int) string {
		return fmt.Sprintf("This model's maximum context length is 32 tokens. However, you requested %d output tokens and your prompt contains at least %d input tokens, for a total of at least %d tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=%d)",
			requested, shown, requested+shown, shown)
	}
	cases := []struct {
		name   string
		body   map[string]any
		status int
		msg    string
		param  string
	}{
		{"fits exactly", map[string]any{"prompt": words(30), "max_tokens": 2}, 200, "", ""},
		{"one over", map[string]any{"prompt": words(31), "max_tokens": 2}, 400, msg(2, 31), "input_tokens"},
		// vLLM tokenizes only max_model_len - max_tokens + 1 tokens, so a
		// long prompt is reported as "at least" that many.
		{"far over", map[string]any{"prompt": words(100), "max_tokens": 10}, 400, msg(10, 23), "input_tokens"},
		{"no max_tokens, too long", map[string]any{"prompt": words(40)}, 400, msg(0, 33), "input_tokens"},
		{"no max_tokens, fills the window", map[string]any{"prompt": words(32)}, 400,
			"The decoder prompt (length 32) plus the number of requested output tokens (at least 1) is longer than the maximum model length of 32. Make sure that `max_model_len` is no smaller than the number of text tokens (prompt + requested output tokens).", ""},
		{"no max_tokens, room for a few", map[string]any{"prompt": words(29)}, 200, "", ""},
		{"max_completion_tokens counts", map[string]any{"prompt": words(10), "max_tokens": 1, "max_completion_tokens": 30}, 400, msg(30, 3), "input_tokens"},
		{"second prompt of an array", map[string]any{"prompt": []string{"a", words(40)}, "max_tokens": 1}, 400, msg(1, 32), "input_tokens"},
	}
	for _, tc := range cases {
		tc.body["model"] = "sim-model"
		status, b := postJSON(t, c, s.URL()+"/v1/completions", jsonBody(t, tc.body), nil)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, status, tc.status, b)
			continue
		}
		if status == 200 {
			continue
		}
		e := decodeError(t, b)
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if e.Error.Message != tc.msg || param != tc.param || e.Error.Type != "BadRequestError" || e.Error.Code != 400 {
			t.Errorf("%s: error %+v (param %q)\nwant message %q, param %q", tc.name, *e.Error, param, tc.msg, tc.param)
		}
	}
	// A request that fits gets at most the window's room by default.
	_, b := postJSON(t, c, s.URL()+"/v1/completions", jsonBody(t, map[string]any{"model": "sim-model", "prompt": words(29), "ignore_eos": true}), nil)
	var done struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(b, &done)
	if done.Usage.CompletionTokens != 3 {
		t.Errorf("default max_tokens with 3 tokens of room: %d generated", done.Usage.CompletionTokens)
	}
}

func TestMaxModelLenErrorMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 64})
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest(strings.Repeat("w ", 100), map[string]any{"max_tokens": 8})), nil)
	if status != http.StatusBadRequest {
		t.Fatalf("status %d: %s", status, b)
	}
	compareBody(t, "vllm_max_model_len_error.json", b)
}

func TestMaxModelLenReported(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 4096})
	_, b := getBody(t, newClient(t), s.URL()+"/v1/models")
	if !strings.Contains(string(b), `"max_model_len":4096`) {
		t.Errorf("/v1/models: %s", b)
	}
	_, b = postJSON(t, newClient(t), s.URL()+"/tokenize", []byte(`{"prompt":"x"}`), nil)
	if !strings.Contains(string(b), `"max_model_len":4096`) {
		t.Errorf("/tokenize: %s", b)
	}
	cfg, err := parseFlags([]string{"--max-model-len", "2048"}, io.Discard)
	if err != nil || cfg.MaxModelLen != 2048 {
		t.Errorf("--max-model-len 2048: %d, %v", cfg.MaxModelLen, err)
	}
	if cfg, _ := parseFlags(nil, io.Discard); cfg.MaxModelLen != maxModelLen {
		t.Errorf("default --max-model-len = %d", cfg.MaxModelLen)
	}
	if _, err := Start(Config{MaxModelLen: -1}); err == nil {
		t.Error("a negative MaxModelLen was accepted")
	}
}

func TestMaxModelLenLegacyWording(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 16, LegacyErrors: true})
	_, b := postJSON(t, newClient(t), s.URL()+"/v1/completions", jsonBody(t, map[string]any{"model": "sim-model", "prompt": "a b c", "max_tokens": 20}), nil)
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	want := "This model's maximum context length is 16 tokens. However, you requested 23 tokens (3 in the messages, 20 in the completion). Please reduce the length of the messages or completion."
	if got["message"] != want || got["object"] != "error" {
		t.Errorf("legacy body %s", b)
	}
}
