package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// Tool call ids are the logical request's (call_1, call_2, …), not the engine's random ones,
// in streams and in whole answers.
func TestToolCallIDsAreDeterministic(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[`+
				`{"id":"chatcmpl-tool-9f2a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},`+
				`{"id":"chatcmpl-tool-77c1","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"role":"assistant","content":""}`,
			`{"tool_calls":[{"index":0,"id":"chatcmpl-tool-9f2a","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Oslo\"}"}}]}`,
			`{"tool_calls":[{"index":1,"id":"chatcmpl-tool-77c1","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`,
		} {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
		}
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer engine.Close()
	c := scriptedGateway(t, engine.URL)
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather and time?")}}

	s := c.Chat.Completions.NewStreaming(testCtx(t), params)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[1].ID != "call_2" ||
		calls[0].Function.Arguments != `{"city":"Oslo"}` || calls[1].Function.Name != "get_time" {
		t.Fatalf("streamed tool calls %+v", calls)
	}

	resp, err := c.Chat.Completions.New(testCtx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if tc := resp.Choices[0].Message.ToolCalls; len(tc) != 2 || tc[0].ID != "call_1" || tc[1].ID != "call_2" {
		t.Fatalf("tool calls %+v", tc)
	}
}
