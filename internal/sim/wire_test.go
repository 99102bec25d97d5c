package sim

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// checkChunkHead checks the fields every chunk of one stream shares.
func checkChunkHead(t *testing.T, m map[string]any, object, idPrefix string, id *string) {
	t.Helper()
	gotID, _ := m["id"].(string)
	if !strings.HasPrefix(gotID, idPrefix) || len(gotID) != len(idPrefix)+32 {
		t.Errorf("id = %q, want %s<32 hex>", gotID, idPrefix)
	}
	if *id == "" {
		*id = gotID
	} else if gotID != *id {
		t.Errorf("id changed within the stream: %q then %q", *id, gotID)
	}
	if m["object"] != object {
		t.Errorf("object = %v, want %s", m["object"], object)
	}
	if c, ok := m["created"].(float64); !ok || c <= 0 {
		t.Errorf("created = %v, want a positive unix time", m["created"])
	}
	if m["model"] != "sim-model" {
		t.Errorf("model = %v, want sim-model", m["model"])
	}
}

func onlyChoice(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	choices, ok := m["choices"].([]any)
	if !ok || len(choices) != 1 {
		t.Fatalf("choices = %v, want exactly one", m["choices"])
	}
	return choices[0].(map[string]any)
}

func TestChatStreamWireFormat(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	const maxTokens = 5
	prompt := RenderChat([]Message{{Role: "user", Content: "Hello there"}})
	want := Tokens("sim", 0, prompt, maxTokens)
	promptTokens := 7 // "Hello", "there" + 3 template tokens + 2 for the generation prompt

	for _, includeUsage := range []bool{true, false} {
		extra := map[string]any{"stream": true, "max_tokens": maxTokens}
		if includeUsage {
			extra["stream_options"] = map[string]any{"include_usage": true}
		}
		req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("Hello there", extra)), nil)
		o := observe(testContext(t), c, req, nil)
		if o.err != nil || o.status != http.StatusOK {
			t.Fatalf("stream: status %d, err %v", o.status, o.err)
		}
		if ct := o.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type = %q", ct)
		}
		wantEvents := 1 + maxTokens + 1 + 1 // role, tokens, finish, [DONE]
		if includeUsage {
			wantEvents++
		}
		if len(o.events) != wantEvents {
			t.Fatalf("include_usage=%v: %d events, want %d: %q", includeUsage, len(o.events), wantEvents, o.events)
		}
		var id string
		role := decodeEvent(t, o.events[0])
		checkChunkHead(t, role, "chat.completion.chunk", "chatcmpl-", &id)
		wantRole := map[string]any{"index": 0.0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}
		if got := onlyChoice(t, role); !reflect.DeepEqual(got, wantRole) {
			t.Errorf("role chunk choice = %v, want %v", got, wantRole)
		}
		for i := range maxTokens {
			m := decodeEvent(t, o.events[1+i])
			checkChunkHead(t, m, "chat.completion.chunk", "chatcmpl-", &id)
			wantChoice := map[string]any{"index": 0.0, "delta": map[string]any{"content": want[i]}, "logprobs": nil, "finish_reason": nil}
			if got := onlyChoice(t, m); !reflect.DeepEqual(got, wantChoice) {
				t.Errorf("token %d choice = %v, want %v", i, got, wantChoice)
			}
		}
		fin := decodeEvent(t, o.events[1+maxTokens])
		checkChunkHead(t, fin, "chat.completion.chunk", "chatcmpl-", &id)
		wantFin := map[string]any{"index": 0.0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": "length", "stop_reason": nil}
		if got := onlyChoice(t, fin); !reflect.DeepEqual(got, wantFin) {
			t.Errorf("finish choice = %v, want %v", got, wantFin)
		}
		if includeUsage {
			u := decodeEvent(t, o.events[2+maxTokens])
			checkChunkHead(t, u, "chat.completion.chunk", "chatcmpl-", &id)
			if choices, ok := u["choices"].([]any); !ok || len(choices) != 0 {
				t.Errorf("usage chunk choices = %v, want []", u["choices"])
			}
			wantUsage := map[string]any{"prompt_tokens": float64(promptTokens), "completion_tokens": float64(maxTokens), "total_tokens": float64(promptTokens + maxTokens)}
			if !reflect.DeepEqual(u["usage"], wantUsage) {
				t.Errorf("usage = %v, want %v", u["usage"], wantUsage)
			}
		}
		for _, ev := range o.events[:len(o.events)-1] {
			if _, has := decodeEvent(t, ev)["usage"]; has && !includeUsage {
				t.Errorf("usage sent without include_usage: %s", ev)
			}
		}
		if last := o.events[len(o.events)-1]; last != "[DONE]" {
			t.Errorf("last event = %q, want [DONE]", last)
		}
	}
}

func TestChatStreamStopsAtNaturalLength(t *testing.T) {
	s := startSim(t, Config{Name: "replica-a"})
	c := newClient(t)
	prompt := RenderChat([]Message{{Role: "user", Content: "tell me a story"}})
	natural := NaturalLength("replica-a", 0, prompt)
	req := newPost(t, testContext(t), s.URL()+"/v1/chat/completions",
		jsonBody(t, chatRequest("tell me a story", map[string]any{"stream": true, "max_tokens": 1000})), nil)
	o := observe(testContext(t), c, req, nil)
	if o.err != nil || len(o.events) != natural+3 {
		t.Fatalf("got %d events (err %v), want %d", len(o.events), o.err, natural+3)
	}
	if fin := onlyChoice(t, decodeEvent(t, o.events[natural+1])); fin["finish_reason"] != "stop" {
		t.Errorf("finish_reason = %v, want stop", fin["finish_reason"])
	}
}

func TestCompletionsStreamWireFormat(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	const maxTokens = 3
	want := Tokens("sim", 0, "Once upon a time", maxTokens)
	body := jsonBody(t, map[string]any{
		"model": "sim-model", "prompt": "Once upon a time", "max_tokens": maxTokens, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
	})
	o := observe(testContext(t), c, newPost(t, testContext(t), s.URL()+"/v1/completions", body, nil), nil)
	if o.err != nil || len(o.events) != maxTokens+3 {
		t.Fatalf("got %d events (err %v): %q", len(o.events), o.err, o.events)
	}
	var id string
	for i := range maxTokens { // no role chunk on this endpoint: tokens come first
		m := decodeEvent(t, o.events[i])
		checkChunkHead(t, m, "text_completion", "cmpl-", &id)
		wantChoice := map[string]any{"index": 0.0, "text": want[i], "logprobs": nil, "finish_reason": nil, "stop_reason": nil}
		if got := onlyChoice(t, m); !reflect.DeepEqual(got, wantChoice) {
			t.Errorf("token %d choice = %v, want %v", i, got, wantChoice)
		}
	}
	fin := decodeEvent(t, o.events[maxTokens])
	wantFin := map[string]any{"index": 0.0, "text": "", "logprobs": nil, "finish_reason": "length", "stop_reason": nil}
	if got := onlyChoice(t, fin); !reflect.DeepEqual(got, wantFin) {
		t.Errorf("finish choice = %v, want %v", got, wantFin)
	}
	u := decodeEvent(t, o.events[maxTokens+1])
	wantUsage := map[string]any{"prompt_tokens": 4.0, "completion_tokens": 3.0, "total_tokens": 7.0}
	if !reflect.DeepEqual(u["usage"], wantUsage) {
		t.Errorf("usage = %v, want %v", u["usage"], wantUsage)
	}
	if o.events[maxTokens+2] != "[DONE]" {
		t.Errorf("last event = %q, want [DONE]", o.events[maxTokens+2])
	}
}

func TestChatNonStreamWireFormat(t *testing.T) {
	s := startSim(t, Config{DefaultMaxTokens: 4})
	c := newClient(t)
	status, b := postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("Hello there", nil)), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var got struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int             `json:"index"`
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	prompt := RenderChat([]Message{{Role: "user", Content: "Hello there"}})
	wantText := strings.Join(Tokens("sim", 0, prompt, 4), "")
	if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Object != "chat.completion" || got.Created <= 0 || got.Model != "sim-model" {
		t.Errorf("head = %+v", got)
	}
	if len(got.Choices) != 1 || got.Choices[0].FinishReason != "length" {
		t.Fatalf("choices = %+v", got.Choices)
	}
	var msg map[string]any
	_ = json.Unmarshal(got.Choices[0].Message, &msg)
	if msg["role"] != "assistant" || msg["content"] != wantText {
		t.Errorf("message = %v, want assistant %q", msg, wantText)
	}
	if got.Usage["prompt_tokens"] != 7.0 || got.Usage["completion_tokens"] != 4.0 || got.Usage["total_tokens"] != 11.0 {
		t.Errorf("usage = %v", got.Usage)
	}
	rec := waitRecord(t, s, ended)
	if rec.Outcome != OutcomeFinished || rec.Stream || rec.TokensSent != 4 || rec.TokensComputed != 4 || rec.ID != got.ID {
		t.Errorf("record = %+v", rec)
	}
}

func TestCompletionsNonStreamWireFormat(t *testing.T) {
	s := startSim(t, Config{Name: "b"})
	c := newClient(t)
	body := jsonBody(t, map[string]any{"model": "sim-model", "prompt": []string{"one two"}, "max_completion_tokens": 2})
	status, b := postJSON(t, c, s.URL()+"/v1/completions", body, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["object"] != "text_completion" || !strings.HasPrefix(got["id"].(string), "cmpl-") {
		t.Errorf("head = %v", got)
	}
	wantChoice := map[string]any{"index": 0.0, "text": strings.Join(Tokens("b", 0, "one two", 2), ""), "logprobs": nil, "finish_reason": "length", "stop_reason": nil}
	if ch := onlyChoice(t, got); !reflect.DeepEqual(ch, wantChoice) {
		t.Errorf("choice = %v, want %v", ch, wantChoice)
	}
	usage := got["usage"].(map[string]any)
	if usage["prompt_tokens"] != 2.0 || usage["completion_tokens"] != 2.0 || usage["total_tokens"] != 4.0 {
		t.Errorf("usage = %v", usage)
	}
}
