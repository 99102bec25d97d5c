package openai

import (
	"strings"
	"testing"
)

func TestParseOtherAPIs(t *testing.T) {
	ok := []struct {
		name   string
		ep     Endpoint
		body   string
		stream bool
		max    int
		prompt string
		prev   string
	}{
		{"messages", Messages, `{"model":"m","max_tokens":64,"system":"Be brief.","stream":true,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"text","text":"Hello"}]},{"role":"user","content":"More?"}]}`,
			true, 64, "system: Be brief.\nuser: Hi\nassistant: Hello\nuser: More?\n", ""},
		{"responses string input", Responses, `{"model":"m","input":"Hi","instructions":"Be brief.","max_output_tokens":32}`,
			false, 32, "system: Be brief.\nuser: Hi\n", ""},
		{"responses items", Responses, `{"model":"m","stream":true,"previous_response_id":"resp_1","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]}]}`,
			true, 0, "user: Hi\n", "resp_1"},
		{"embeddings", Embeddings, `{"model":"m","input":["a","b"],"encoding_format":"base64"}`, false, 0, "a\nb", ""},
	}
	for _, tc := range ok {
		r, e := ParseRequest(tc.ep, []byte(tc.body))
		if e != nil {
			t.Fatalf("%s: %v", tc.name, e)
		}
		if r.Endpoint != tc.ep || r.Model != "m" || r.Stream != tc.stream || r.MaxTokens != tc.max || r.Prompt != tc.prompt ||
			r.PreviousResponseID != tc.prev || r.Choices != 1 || string(r.Body) != tc.body || r.Store != (tc.ep == Responses) {
			t.Fatalf("%s: %+v", tc.name, r)
		}
	}
	bad := []struct {
		name, param, code, msg string
		ep                     Endpoint
		body                   string
	}{
		{"messages without max_tokens", "max_tokens", "missing_required_parameter", "max_tokens: Field required", Messages, `{"model":"m","messages":[{"role":"user","content":"x"}]}`},
		{"messages with a system role turn", "messages[0].role", "invalid_value", "'user' or 'assistant'", Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`},
		{"messages without content", "messages[0].content", "missing_required_parameter", "Field required", Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`},
		{"messages temperature above 1", "temperature", "invalid_value", "between 0 and 1", Messages, `{"model":"m","max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"x"}]}`},
		{"responses without input", "input", "missing_required_parameter", "'input'", Responses, `{"model":"m"}`},
		{"responses with a number input", "input", "invalid_type", "a string or an array", Responses, `{"model":"m","input":3}`},
		{"responses previous id not a string", "previous_response_id", "invalid_type", "non-empty string", Responses, `{"model":"m","input":"x","previous_response_id":7}`},
		{"embeddings without input", "input", "missing_required_parameter", "'input'", Embeddings, `{"model":"m"}`},
		{"embeddings streamed", "stream", "unsupported_parameter", "not supported", Embeddings, `{"model":"m","input":"x","stream":true}`},
		{"embeddings empty input", "input", "empty_array", "'input'", Embeddings, `{"model":"m","input":[]}`},
	}
	for _, tc := range bad {
		_, e := ParseRequest(tc.ep, []byte(tc.body))
		if e == nil || e.Param != tc.param || e.Code != tc.code || e.Status != 400 || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
}
