package openai

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseRequestValid(t *testing.T) {
	cases := []struct {
		name string
		ep   Endpoint
		body string
		want Request // Body is checked separately
	}{
		{
			name: "chat stream with usage and extensions",
			ep:   Chat,
			body: `{"model":"llama","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Capital of France?"}],` +
				`"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.7,"n":1,"top_k":20,"chat_template_kwargs":{"enable_thinking":false}}`,
			want: Request{Endpoint: Chat, Model: "llama", Stream: true, IncludeUsage: true, MaxTokens: 64,
				Prompt: "system: Be brief.\nuser: Capital of France?\n", N: 1, Choices: 1},
		},
		{
			name: "chat content parts and tool call message",
			ep:   Chat,
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"here"}]},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"}]}`,
			want: Request{Endpoint: Chat, Model: "m", Prompt: "user: look\nhere\nassistant: \ntool: 42\n", N: 1, Choices: 1},
		},
		{
			name: "max_completion_tokens wins over max_tokens",
			ep:   Chat,
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"max_completion_tokens":20,"stream":false}`,
			want: Request{Endpoint: Chat, Model: "m", MaxTokens: 20, Prompt: "user: hi\n", N: 1, Choices: 1},
		},
		{
			name: "nulls count as unset",
			ep:   Chat,
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":null,"n":null,"max_tokens":null,"temperature":null,"stream_options":null}`,
			want: Request{Endpoint: Chat, Model: "m", Prompt: "user: hi\n", N: 1, Choices: 1},
		},
		{
			name: "integral float accepted",
			ep:   Chat,
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16.0,"n":1.0,"temperature":2}`,
			want: Request{Endpoint: Chat, Model: "m", MaxTokens: 16, Prompt: "user: hi\n", N: 1, Choices: 1},
		},
		{
			name: "completions string prompt",
			ep:   Completions,
			body: `{"model":"m","prompt":"Once upon","max_tokens":5,"stream":true,"stream_options":{"include_usage":false}}`,
			want: Request{Endpoint: Completions, Model: "m", Stream: true, MaxTokens: 5, Prompt: "Once upon", N: 1, Choices: 1},
		},
		{
			name: "completions array of strings",
			ep:   Completions,
			body: `{"model":"m","prompt":["a","b"]}`,
			want: Request{Endpoint: Completions, Model: "m", Prompt: "a\nb", N: 1, Choices: 2},
		},
		{
			name: "chat with several choices",
			ep:   Chat,
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
			want: Request{Endpoint: Chat, Model: "m", Stream: true, IncludeUsage: true, ContinuousUsage: true, Prompt: "user: hi\n", N: 3, Choices: 3},
		},
		{
			name: "completions prompt array with n",
			ep:   Completions,
			body: `{"model":"m","prompt":["a","b"],"n":2}`,
			want: Request{Endpoint: Completions, Model: "m", Prompt: "a\nb", N: 2, Choices: 4},
		},
		{
			name: "completions token ids",
			ep:   Completions,
			body: `{"model":"m","prompt":[1,2,3]}`,
			want: Request{Endpoint: Completions, Model: "m", N: 1, Choices: 1},
		},
		{
			name: "completions batches of token ids",
			ep:   Completions,
			body: `{"model":"m","prompt":[[1,2],[3]]}`,
			want: Request{Endpoint: Completions, Model: "m", N: 1, Choices: 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, e := ParseRequest(tc.ep, []byte(tc.body))
			if e != nil {
				t.Fatalf("unexpected error: %v", e)
			}
			if string(r.Body) != tc.body {
				t.Errorf("Body changed: %s", r.Body)
			}
			r.Body = nil
			if fmt.Sprintf("%+v", *r) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("got  %+v\nwant %+v", *r, tc.want)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name    string
		ep      Endpoint
		body    string
		param   string
		code    string
		message string // a substring the message must contain
	}{
		{"empty body", Chat, ``, "", "invalid_json", "empty"},
		{"malformed json", Chat, `{"model":"m",}`, "", "invalid_json", "invalid character '}'"},
		{"truncated json", Chat, `{"model":"m"`, "", "invalid_json", "unexpected end of JSON input"},
		{"body is an array", Chat, `[{"model":"m"}]`, "", "invalid_type", "must be a JSON object, but got an array"},
		{"body is null", Chat, `null`, "", "invalid_type", "must be a JSON object, but got null"},
		{"model missing", Chat, `{` + msgs + `}`, "model", "missing_required_parameter", "you must provide a model parameter"},
		{"model empty", Chat, `{"model":"",` + msgs + `}`, "model", "missing_required_parameter", "model"},
		{"model not a string", Chat, `{"model":7,` + msgs + `}`, "model", "invalid_type", "Invalid type for 'model': expected a string, but got a number"},
		{"messages missing", Chat, `{"model":"m"}`, "messages", "missing_required_parameter", "'messages'"},
		{"messages not an array", Chat, `{"model":"m","messages":"hi"}`, "messages", "invalid_type", "expected an array, but got a string"},
		{"messages empty", Chat, `{"model":"m","messages":[]}`, "messages", "empty_array", "empty array"},
		{"message not an object", Chat, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},"c"]}`, "messages[2]", "invalid_type", "expected an object, but got a string"},
		{"role missing", Chat, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user"},{"content":"c"}]}`, "messages[2].role", "missing_required_parameter", "'messages[2].role'"},
		{"role not a string", Chat, `{"model":"m","messages":[{"role":1,"content":"c"}]}`, "messages[0].role", "invalid_type", "expected a string, but got a number"},
		{"prompt missing", Completions, `{"model":"m"}`, "prompt", "missing_required_parameter", "'prompt'"},
		{"prompt wrong type", Completions, `{"model":"m","prompt":{"text":"x"}}`, "prompt", "invalid_type", "but got an object"},
		{"prompt mixed array", Completions, `{"model":"m","prompt":["a",1]}`, "prompt", "invalid_type", "expected a string, an array of strings, or an array of token ids"},
		{"prompt empty array", Completions, `{"model":"m","prompt":[]}`, "prompt", "empty_array", "empty array"},
		{"chat body on completions", Completions, `{"model":"m",` + msgs + `}`, "prompt", "missing_required_parameter", "'prompt'"},
		{"stream not a bool", Chat, `{"model":"m",` + msgs + `,"stream":"true"}`, "stream", "invalid_type", "expected a boolean, but got a string"},
		{"n not an integer", Chat, `{"model":"m",` + msgs + `,"n":1.5}`, "n", "invalid_type", "expected an integer"},
		{"n as string", Chat, `{"model":"m",` + msgs + `,"n":"1"}`, "n", "invalid_type", "expected an integer, but got a string"},
		{"n above the limit", Chat, `{"model":"m",` + msgs + `,"n":129}`, "n", "invalid_value", "at most 128"},
		{"choices above the limit", Completions, `{"model":"m","prompt":["a","b","c","d","e","f","g","h","i"],"n":128}`, "n", "invalid_value", "more than the limit of 1024"},
		{"n zero", Chat, `{"model":"m",` + msgs + `,"n":0}`, "n", "invalid_value", "at least 1"},
		{"max_tokens zero", Chat, `{"model":"m",` + msgs + `,"max_tokens":0}`, "max_tokens", "invalid_value", "positive integer"},
		{"max_tokens negative", Completions, `{"model":"m","prompt":"p","max_tokens":-5}`, "max_tokens", "invalid_value", "got -5"},
		{"max_tokens not an integer", Chat, `{"model":"m",` + msgs + `,"max_tokens":"64"}`, "max_tokens", "invalid_type", "expected an integer, but got a string"},
		{"max_completion_tokens fraction", Chat, `{"model":"m",` + msgs + `,"max_completion_tokens":2.5}`, "max_completion_tokens", "invalid_type", "expected an integer"},
		{"max_tokens huge", Chat, `{"model":"m",` + msgs + `,"max_tokens":99999999999}`, "max_tokens", "invalid_value", "too large"},
		{"temperature too high", Chat, `{"model":"m",` + msgs + `,"temperature":2.5}`, "temperature", "invalid_value", "between 0 and 2, but got 2.5"},
		{"temperature negative", Chat, `{"model":"m",` + msgs + `,"temperature":-0.1}`, "temperature", "invalid_value", "got -0.1"},
		{"temperature not a number", Chat, `{"model":"m",` + msgs + `,"temperature":"hot"}`, "temperature", "invalid_type", "expected a number, but got a string"},
		{"stream_options without stream", Chat, `{"model":"m",` + msgs + `,"stream_options":{"include_usage":true}}`, "stream_options", "invalid_value", "only allowed when 'stream' is enabled"},
		{"stream_options with stream false", Chat, `{"model":"m",` + msgs + `,"stream":false,"stream_options":{}}`, "stream_options", "invalid_value", "only allowed"},
		{"stream_options not an object", Chat, `{"model":"m",` + msgs + `,"stream":true,"stream_options":true}`, "stream_options", "invalid_type", "expected an object, but got a boolean"},
		{"include_usage not a bool", Chat, `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "invalid_type", "expected a boolean"},
		{"first problem wins", Chat, `{"model":1,"messages":[],"n":5}`, "model", "invalid_type", "'model'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, e := ParseRequest(tc.ep, []byte(tc.body))
			if e == nil {
				t.Fatalf("no error; parsed %+v", r)
			}
			if r != nil {
				t.Errorf("request returned along with error")
			}
			if e.Status != 400 || e.Type != TypeInvalidRequest {
				t.Errorf("status %d type %q, want 400 invalid_request_error", e.Status, e.Type)
			}
			if e.Param != tc.param || e.Code != tc.code {
				t.Errorf("param %q code %q, want param %q code %q", e.Param, e.Code, tc.param, tc.code)
			}
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not contain %q", e.Message, tc.message)
			}
		})
	}
}

func TestParseRequestUnknownEndpoint(t *testing.T) {
	_, e := ParseRequest(0, []byte(`{"model":"m"}`))
	if e == nil || e.Status != 500 {
		t.Fatalf("got %v, want a 500 error", e)
	}
}

func TestEndpointNames(t *testing.T) {
	if Chat.Path() != "/v1/chat/completions" || Completions.Path() != "/v1/completions" || Endpoint(9).Path() != "" {
		t.Fatal("wrong paths")
	}
	if Chat.String() != "chat" || Completions.String() != "completions" || Endpoint(9).String() != "endpoint(9)" {
		t.Fatal("wrong names")
	}
}
