package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// messagesRequest is an Anthropic Messages body for the default model.
func messagesRequest(content string, maxTokens int, extra map[string]any) map[string]any {
	req := map[string]any{
		"model":      "sim-model",
		"max_tokens": maxTokens,
		"messages":   []map[string]any{{"role": "user", "content": content}},
	}
	for k, v := range extra {
		req[k] = v
	}
	return req
}

// anthropicValueKeys are the keys whose values an Anthropic event or body
// must share with vLLM's: the event and block types, the block index, the
// role and the stop reason.
var anthropicValueKeys = keys("type", "index", "role", "stop_reason", "stop_sequence")

// anthropicErrorBody decodes AnthropicErrorResponse.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnthropicError(t *testing.T, b []byte) anthropicErrorBody {
	t.Helper()
	var e anthropicErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error == nil {
		t.Fatalf("not an Anthropic error body: %s (%v)", b, err)
	}
	return e
}

// messagesReplyBody decodes a whole Messages reply.
type messagesReplyBody struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	Model      string        `json:"model"`
	StopReason string        `json:"stop_reason"`
	Usage      messagesUsage `json:"usage"`
}

func postMessages(t *testing.T, s *Server, body map[string]any, header map[string]string) (int, []byte) {
	t.Helper()
	return postJSON(t, newClient(t), s.URL()+"/v1/messages", jsonBody(t, body), header)
}

func TestMessagesWholeMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	status, body := postMessages(t, s, messagesRequest("Hi", 3, nil), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	compareBodyValues(t, "vllm_messages.json", body, anthropicValueKeys)
	var r messagesReplyBody
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	prompt := RenderChat([]Message{{Role: "user", Content: "Hi"}})
	if want := strings.Join(Tokens("sim", 0, prompt, 3), ""); r.Content[0].Text != want {
		t.Errorf("text %q, want %q", r.Content[0].Text, want)
	}
	if !strings.HasPrefix(r.ID, "chatcmpl-") || !isHex32(strings.TrimPrefix(r.ID, "chatcmpl-")) {
		t.Errorf("id %q, want the chat completion's id, chatcmpl-<32 hex>", r.ID)
	}
	if r.Usage != (messagesUsage{InputTokens: len(tokenIDs(prompt)), OutputTokens: 3}) || r.Model != "sim-model" {
		t.Errorf("usage %+v, model %q", r.Usage, r.Model)
	}
	if strings.Contains(string(body), "stop_sequence") {
		t.Errorf("a whole reply leaves out the null stop_sequence (exclude_none): %s", body)
	}
	rec := s.Records()[0]
	if rec.Endpoint != "messages" || rec.ID != r.ID || rec.Outcome != OutcomeFinished || rec.TokensComputed != 3 || rec.TokensSent != 3 || rec.Stream {
		t.Errorf("record = %+v", rec)
	}
}

func TestMessagesStreamMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	req := newPost(t, testContext(t), s.URL()+"/v1/messages", jsonBody(t, messagesRequest("Hi", 3, map[string]any{"stream": true})), nil)
	o := observeNamed(testContext(t), newClient(t), req, nil)
	if o.err != nil || o.status != http.StatusOK {
		t.Fatalf("status %d, err %v, body %s", o.status, o.err, o.body)
	}
	if ct := o.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	compareNamedStream(t, "vllm_messages_stream.sse", o.events, anthropicValueKeys)
	prompt := RenderChat([]Message{{Role: "user", Content: "Hi"}})
	want := Tokens("sim", 0, prompt, 3)
	for i, w := range want {
		var ev struct {
			Delta struct{ Text string } `json:"delta"`
		}
		_ = json.Unmarshal([]byte(o.events[2+i].data), &ev)
		if ev.Delta.Text != w {
			t.Errorf("delta %d = %q, want %q", i, ev.Delta.Text, w)
		}
	}
	var start struct {
		Message struct {
			ID    string        `json:"id"`
			Usage messagesUsage `json:"usage"`
		} `json:"message"`
	}
	_ = json.Unmarshal([]byte(o.events[0].data), &start)
	rec := s.Records()[0]
	if start.Message.ID != rec.ID || start.Message.Usage.InputTokens != rec.PromptTokens {
		t.Errorf("message_start %s, record %+v", o.events[0].data, rec)
	}
	if rec.Endpoint != "messages" || !rec.Stream || rec.TokensSent != 3 || rec.Outcome != OutcomeFinished {
		t.Errorf("record = %+v", rec)
	}
}

// TestMessagesTextEqualsChat: vLLM runs a Messages request as the chat
// request it converts it to, so the same conversation gives the same text,
// whole or streamed, and a natural end is end_turn where chat says stop.
func TestMessagesTextEqualsChat(t *testing.T) {
	s := startSim(t, Config{Name: "replica-m", StreamInterval: 3})
	c := newClient(t)
	anthropic := map[string]any{
		"model": "sim-model", "max_tokens": 100,
		"system": []map[string]any{{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}},
		"messages": []map[string]any{
			{"role": "user", "content": "Hello"},
			{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "Hi there"}}},
			{"role": "user", "content": []map[string]any{{"type": "text", "text": "first"}, {"type": "text", "text": "second"}}},
		},
	}
	chat := map[string]any{
		"model": "sim-model", "max_tokens": 100,
		"messages": []map[string]any{
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": "Hello"},
			{"role": "assistant", "content": "Hi there"},
			{"role": "user", "content": []map[string]any{{"type": "text", "text": "first"}, {"type": "text", "text": "second"}}},
		},
	}
	status, body := postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chat), nil)
	if status != http.StatusOK {
		t.Fatalf("chat: %d %s", status, body)
	}
	var cr struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &cr); err != nil {
		t.Fatal(err)
	}
	if cr.Choices[0].FinishReason != "stop" {
		t.Fatalf("chat finish_reason %q, want a natural stop", cr.Choices[0].FinishReason)
	}

	status, body = postJSON(t, c, s.URL()+"/v1/messages", jsonBody(t, anthropic), nil)
	var mr messagesReplyBody
	if status != http.StatusOK || json.Unmarshal(body, &mr) != nil {
		t.Fatalf("messages: %d %s", status, body)
	}
	if mr.Content[0].Text != cr.Choices[0].Message.Content || mr.StopReason != "end_turn" || mr.Usage.InputTokens != cr.Usage.PromptTokens {
		t.Errorf("messages %s\nchat text %q, prompt %d tokens", body, cr.Choices[0].Message.Content, cr.Usage.PromptTokens)
	}

	anthropic["stream"] = true
	o := observeNamed(testContext(t), c, newPost(t, testContext(t), s.URL()+"/v1/messages", jsonBody(t, anthropic), nil), nil)
	var text strings.Builder
	for _, ev := range o.events {
		var d struct {
			Delta struct {
				Text       string `json:"text"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
		}
		_ = json.Unmarshal([]byte(ev.data), &d)
		text.WriteString(d.Delta.Text)
		if ev.name == "message_delta" && d.Delta.StopReason != "end_turn" {
			t.Errorf("stream stop_reason %q", d.Delta.StopReason)
		}
	}
	if o.err != nil || text.String() != cr.Choices[0].Message.Content {
		t.Errorf("streamed text %q (err %v), chat %q", text.String(), o.err, cr.Choices[0].Message.Content)
	}
}

// TestMessagesToolUse: tools with a forced tool_choice answer with a
// tool_use block whose id is the chat call's, as vLLM converts it.
func TestMessagesToolUse(t *testing.T) {
	s := startSim(t, Config{})
	weather := []map[string]any{{"name": "get_weather", "description": "now", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	count := []map[string]any{{"name": "count", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}}

	t.Run("whole named", func(t *testing.T) {
		status, body := postMessages(t, s, messagesRequest("Weather?", 50, map[string]any{
			"tools": weather, "tool_choice": map[string]any{"type": "tool", "name": "get_weather"}}), nil)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		compareBodyValues(t, "vllm_messages_tool_named.json", body, anthropicValueKeys)
		var r messagesReplyBody
		_ = json.Unmarshal(body, &r)
		var input map[string]any
		if err := json.Unmarshal(r.Content[0].Input, &input); err != nil || !strings.HasPrefix(r.Content[0].ID, "chatcmpl-tool-") || r.Content[0].Name != "get_weather" {
			t.Errorf("tool_use block %+v (%v)", r.Content[0], err)
		}
	})
	t.Run("stream named", func(t *testing.T) {
		req := newPost(t, testContext(t), s.URL()+"/v1/messages", jsonBody(t, messagesRequest("Count", 50, map[string]any{
			"stream": true, "tools": count, "tool_choice": map[string]any{"type": "tool", "name": "count"}})), nil)
		o := observeNamed(testContext(t), newClient(t), req, nil)
		if o.err != nil {
			t.Fatal(o.err)
		}
		compareNamedStream(t, "vllm_messages_stream_tool_named.sse", o.events, anthropicValueKeys)
		var args strings.Builder
		for _, ev := range o.events {
			var d struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			_ = json.Unmarshal([]byte(ev.data), &d)
			args.WriteString(d.Delta.PartialJSON)
		}
		var parsed map[string]int
		if err := json.Unmarshal([]byte(args.String()), &parsed); err != nil {
			t.Errorf("streamed arguments %q: %v", args.String(), err)
		}
	})
	t.Run("stream any", func(t *testing.T) {
		// tool_choice any is chat's "required", whose stream finishes
		// with tool_calls: stop_reason tool_use.
		req := newPost(t, testContext(t), s.URL()+"/v1/messages", jsonBody(t, messagesRequest("Count", 50, map[string]any{
			"stream": true, "tools": count, "tool_choice": map[string]any{"type": "any"}})), nil)
		o := observeNamed(testContext(t), newClient(t), req, nil)
		last := o.events[len(o.events)-2]
		if o.err != nil || last.name != "message_delta" || !strings.Contains(last.data, `"stop_reason":"tool_use"`) {
			t.Errorf("events %q, err %v", o.names(), o.err)
		}
	})
	t.Run("whole named cut short", func(t *testing.T) {
		// json.loads of the cut arguments fails in vLLM's converter: 500.
		status, body := postMessages(t, s, messagesRequest("Weather?", 2, map[string]any{
			"tools": weather, "tool_choice": map[string]any{"type": "tool", "name": "get_weather"}}), nil)
		e := decodeAnthropicError(t, body)
		if status != http.StatusInternalServerError || e.Error.Type != "internal_error" || e.Error.Message != "Unterminated string starting at: line 1 column 2 (char 1)" {
			t.Errorf("%d %s", status, body)
		}
		if rec := waitRecord(t, s, func(r Record) bool { return r.TokensComputed == 2 && ended(r) }); rec.Outcome != OutcomeError {
			t.Errorf("record = %+v", rec)
		}
	})
	t.Run("whole any cut short", func(t *testing.T) {
		status, body := postMessages(t, s, messagesRequest("Weather?", 2, map[string]any{
			"tools": weather, "tool_choice": map[string]any{"type": "any"}}), nil)
		var r messagesReplyBody
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || len(r.Content) != 0 || r.StopReason != "max_tokens" {
			t.Errorf("%d %s, want no call and max_tokens", status, body)
		}
	})
	t.Run("auto answers in text", func(t *testing.T) {
		status, body := postMessages(t, s, messagesRequest("Weather?", 3, map[string]any{"tools": weather}), nil)
		var r messagesReplyBody
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Content[0].Type != "text" {
			t.Errorf("%d %s", status, body)
		}
	})
}

func TestMessagesErrors(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 64})
	t.Run("missing max_tokens", func(t *testing.T) {
		// Request validation is the app-wide handler's: OpenAI shape.
		status, body := postJSON(t, newClient(t), s.URL()+"/v1/messages", []byte(`{"model": "sim-model", "messages": [{"role": "user", "content": "Hi"}]}`), nil)
		if status != http.StatusBadRequest {
			t.Fatalf("status %d", status)
		}
		compareBody(t, "vllm_messages_validation_error.json", body)
		e := decodeError(t, body)
		want := "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'max_tokens'), 'msg': 'Field required', 'input': {'model': 'sim-model', 'messages': [{'role': 'user', 'content': 'Hi'}]}}"
		if e.Error.Message != want || e.Error.Type != "Bad Request" || *e.Error.Param != "body.max_tokens" {
			t.Errorf("error %s", body)
		}
	})
	t.Run("invalid values", func(t *testing.T) {
		for _, c := range []struct {
			body  string
			param string
			msg   string
		}{
			{`{"model":"sim-model","max_tokens":0,"messages":[]}`, "body.max_tokens", "'msg': 'Value error, max_tokens must be positive', 'input': 0, 'ctx': {'error': ValueError('max_tokens must be positive')}"},
			{`{"model":"","max_tokens":1,"messages":[]}`, "body.model", "Model is required"},
			{`{"model":"sim-model","max_tokens":1,"messages":[{"role":"robot","content":"x"}]}`, "body.messages.0.role", "Input should be 'user', 'assistant' or 'system'"},
			{`{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":7}]}`, "body.messages.0.content", "'loc': ('body', 'messages', 0, 'content', 'str')"},
			{`{"model":"sim-model","max_tokens":1,"messages":[],"tool_choice":{"type":"tool"}}`, "body.tool_choice", "tool_choice.name is required when type is 'tool'"},
			{`{"model":"sim-model","max_tokens":"many","messages":[]}`, "body.max_tokens", "'type': 'int_parsing'"},
			{`{"model":"sim-model","max_tokens":null,"messages":[]}`, "body.max_tokens", "'type': 'int_type'"},
			{`{"model":"sim-model",`, "body.21", "json_invalid"},
		} {
			status, body := postJSON(t, newClient(t), s.URL()+"/v1/messages", []byte(c.body), nil)
			e := decodeError(t, body)
			if status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.msg) {
				t.Errorf("%s: %d %s", c.body, status, body)
			}
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		status, body := postMessages(t, s, map[string]any{"model": "claude-3-5-sonnet-latest", "max_tokens": 5, "messages": []map[string]any{{"role": "user", "content": "Hi"}}}, nil)
		if status != http.StatusNotFound {
			t.Fatalf("status %d", status)
		}
		compareBodyValues(t, "vllm_messages_not_found.json", body, keys("type"))
		if e := decodeAnthropicError(t, body); e.Error.Message != "The model `claude-3-5-sonnet-latest` does not exist." {
			t.Errorf("%s", body)
		}
	})
	t.Run("context too long", func(t *testing.T) {
		status, body := postMessages(t, s, messagesRequest("Hi", 100, nil), nil)
		e := decodeAnthropicError(t, body)
		if status != http.StatusBadRequest || e.Error.Type != "BadRequestError" || !strings.Contains(e.Error.Message, "maximum context length is 64 tokens") {
			t.Errorf("%d %s", status, body)
		}
	})
	t.Run("tool choice without tools", func(t *testing.T) {
		status, body := postMessages(t, s, messagesRequest("Hi", 5, map[string]any{"tool_choice": map[string]any{"type": "any"}}), nil)
		if e := decodeAnthropicError(t, body); status != http.StatusBadRequest || e.Error.Type != "BadRequestError" {
			t.Errorf("%d %s", status, body)
		}
	})
	for _, r := range s.Records() {
		if r.Endpoint != "messages" || r.Outcome != OutcomeError {
			t.Errorf("record = %+v", r)
		}
	}
}

func TestMessagesCountTokens(t *testing.T) {
	s := startSim(t, Config{})
	status, body := postJSON(t, newClient(t), s.URL()+"/v1/messages/count_tokens",
		jsonBody(t, map[string]any{"model": "sim-model", "system": "Be brief.", "messages": []map[string]any{{"role": "user", "content": "Hi"}}}), nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	compareBody(t, "vllm_messages_count_tokens.json", body)
	want := len(tokenIDs(RenderChat([]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}})))
	var r struct {
		InputTokens int `json:"input_tokens"`
	}
	if json.Unmarshal(body, &r) != nil || r.InputTokens != want {
		t.Errorf("%s, want %d tokens", body, want)
	}
	if len(s.Records()) != 0 {
		t.Errorf("counting tokens made records: %+v", s.Records())
	}
}

// messagesFaultRequest is a streamed Messages request of 6 tokens.
func messagesFaultRequest(t *testing.T, s *Server, spec string, stream bool) *http.Request {
	body := jsonBody(t, messagesRequest("fault matrix", 6, map[string]any{"stream": stream}))
	return newPost(t, testContext(t), s.URL()+"/v1/messages", body, map[string]string{"X-Sim-Fault": spec})
}

// messagesFaultPoints: what a Messages client has seen when a fault fires
// (events: message_start, content_block_start, then one delta per token).
var messagesFaultPoints = []struct {
	spec           string
	headers        bool
	events         int
	computed, sent int
}{
	{"accept", false, 0, 0, 0},
	{"prefill", true, 0, 0, 0},
	{"computed:2", true, 4, 3, 2},
	{"sent:2", true, 5, 3, 3},
}

func TestMessagesFaultErrorLikeVLLM(t *testing.T) {
	for _, p := range messagesFaultPoints {
		for _, action := range []string{"error", "error:nodone", "status:503"} {
			t.Run(action+"@"+p.spec, func(t *testing.T) {
				s := startSim(t, Config{})
				o := observeNamed(testContext(t), newClient(t), messagesFaultRequest(t, s, action+"@"+p.spec, true), nil)
				if o.err != nil {
					t.Fatalf("client error %v", o.err)
				}
				if !p.headers {
					e := decodeAnthropicError(t, o.body)
					wantStatus, wantType := 500, "InternalServerError"
					if action == "status:503" {
						wantStatus, wantType = 503, "ServiceUnavailableError"
					}
					if o.status != wantStatus || e.Error.Type != wantType {
						t.Errorf("status %d, body %s", o.status, o.body)
					}
				} else {
					// One error event ends the stream; vLLM's converter
					// sends nothing after it, [DONE] or not.
					if len(o.events) != p.events+1 || o.events[p.events].name != "error" {
						t.Fatalf("events %q", o.names())
					}
					var ev struct {
						Type  string `json:"type"`
						Error struct{ Type, Message string }
					}
					_ = json.Unmarshal([]byte(o.events[p.events].data), &ev)
					code := "'code': 500}}"
					if action == "status:503" {
						code = "'code': 503}}"
					}
					if ev.Type != "error" || ev.Error.Type != "internal_error" ||
						!strings.HasPrefix(ev.Error.Message, "2 validation errors for ChatCompletionStreamResponse\nmodel\n  Field required [type=missing, input_value={'error': {'message': ") ||
						!strings.Contains(ev.Error.Message, code) {
						t.Errorf("error event %s", o.events[p.events].data)
					}
				}
				if rec := s.Records()[0]; rec.Outcome != OutcomeError || rec.TokensComputed != p.computed || rec.TokensSent != p.sent || rec.Endpoint != "messages" {
					t.Errorf("record = %+v", rec)
				}
			})
		}
	}
}

// TestMessagesStreamErrorMatchesVLLM compares the whole failing stream with
// vLLM's, the error's message included byte for byte.
func TestMessagesStreamErrorMatchesVLLM(t *testing.T) {
	s := startSim(t, Config{})
	req := newPost(t, testContext(t), s.URL()+"/v1/messages", jsonBody(t, messagesRequest("Hi", 3, map[string]any{"stream": true})),
		map[string]string{"X-Sim-Fault": "error@sent:0"})
	o := observeNamed(testContext(t), newClient(t), req, nil)
	compareNamedStream(t, "vllm_messages_stream_error.sse", o.events, anthropicValueKeys)
	want := loadNamedSSEFixture(t, "vllm_messages_stream_error.sse")
	if got := o.events[len(o.events)-1].data; got != want[len(want)-1].data {
		t.Errorf("error event\n got %s\nwant %s", got, want[len(want)-1].data)
	}
}

func TestMessagesFaultErrorWhole(t *testing.T) {
	s := startSim(t, Config{})
	status, body := postJSON(t, newClient(t), s.URL()+"/v1/messages", jsonBody(t, messagesRequest("x", 6, nil)), map[string]string{"X-Sim-Fault": "error@computed:2"})
	if e := decodeAnthropicError(t, body); status != 500 || e.Error.Type != "InternalServerError" || e.Error.Message != "Internal server error" {
		t.Errorf("%d %s", status, body)
	}
	if rec := s.Records()[0]; rec.Outcome != OutcomeError || rec.TokensComputed != 3 {
		t.Errorf("record = %+v", rec)
	}
}

func TestMessagesFaultsBreakTheConnection(t *testing.T) {
	for _, p := range messagesFaultPoints {
		t.Run("crash@"+p.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			o := observeNamed(testContext(t), newClient(t), messagesFaultRequest(t, s, "crash@"+p.spec, true), nil)
			if !isReset(o.err) || len(o.events) != p.events || (o.status == http.StatusOK) != p.headers {
				t.Errorf("status %d, events %q, err %v", o.status, o.names(), o.err)
			}
			if rec := s.Records()[0]; rec.Outcome != OutcomeCrashed || rec.TokensComputed != p.computed || rec.TokensSent != p.sent {
				t.Errorf("record = %+v", rec)
			}
		})
		t.Run("reset@"+p.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			o := observeNamed(testContext(t), newClient(t), messagesFaultRequest(t, s, "reset@"+p.spec, true), nil)
			if !isReset(o.err) || len(o.events) != p.events {
				t.Errorf("events %q, err %v", o.names(), o.err)
			}
			if rec := s.Records()[0]; rec.Outcome != OutcomeReset || rec.TokensSent != p.sent {
				t.Errorf("record = %+v", rec)
			}
		})
	}
	t.Run("drop@sent:1", func(t *testing.T) {
		s := startSim(t, Config{})
		o := observeNamed(testContext(t), newClient(t), messagesFaultRequest(t, s, "drop@sent:1", true), nil)
		if !errors.Is(o.err, io.ErrUnexpectedEOF) || len(o.events) != 4 {
			t.Errorf("events %q, err %v", o.names(), o.err)
		}
		if rec := s.Records()[0]; rec.Outcome != OutcomeDropped || rec.TokensSent != 2 {
			t.Errorf("record = %+v", rec)
		}
	})
}

func TestMessagesGarbageOversizeHang(t *testing.T) {
	for _, c := range []struct {
		spec    string
		events  int // events the client sees, the broken one included
		outcome string
	}{
		{"garbage@sent:1", 5, OutcomeGarbage},
		{"oversize@sent:0", 4, OutcomeOversize},
		{"hang@sent:1", 4, OutcomeHung},
	} {
		t.Run(c.spec, func(t *testing.T) {
			s := startSim(t, Config{})
			ctx, cancel := contextWithCancel(t)
			progress := make(chan int, 100)
			done := make(chan namedObservation, 1)
			req := messagesFaultRequest(t, s, c.spec, true)
			go func() { done <- observeNamed(ctx, newClient(t), req, progress) }()
			waitProgress(t, progress, c.events)
			if rec := s.Records()[0]; rec.Outcome != "" {
				t.Fatalf("record ended while silent: %+v", rec)
			}
			cancel()
			o := <-done
			if !errors.Is(o.err, context.Canceled) {
				t.Errorf("client error %v, want its own cancel", o.err)
			}
			last := o.events[len(o.events)-1]
			switch c.outcome {
			case OutcomeGarbage:
				if last.name != "content_block_delta" || json.Valid([]byte(last.data)) {
					t.Errorf("last event %+v is not a cut-off delta", last)
				}
			case OutcomeOversize:
				if last.name != "content_block_delta" || len(last.data) <= 4<<20 || !json.Valid([]byte(last.data)) {
					t.Errorf("last event %s of %d bytes", last.name, len(last.data))
				}
			}
			if rec := waitRecord(t, s, ended); rec.Outcome != c.outcome {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}
