package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// toolEngine answers every chat request with two tool calls whose ids are new on every
// request, as real engines' are (vLLM: chatcmpl-tool-<hex>; with mistral, 9 alphanumeric
// characters). A request whose prompt says "fail first" gets a 500 on its first attempt.
func toolEngine(t *testing.T, mistral bool) string {
	var n atomic.Int64
	var mu sync.Mutex
	failed := map[string]bool{}
	newID := func() string {
		k := n.Add(1)
		if mistral {
			return fmt.Sprintf("Ab%07d", k)
		}
		return fmt.Sprintf("chatcmpl-tool-%032x", k)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		failFirst := strings.Contains(string(body), "fail first") && !failed[r.Header.Get("X-Request-Id")]
		failed[r.Header.Get("X-Request-Id")] = true
		mu.Unlock()
		if failFirst {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}`)
			return
		}
		id1, id2 := newID(), newID()
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[`+
				`{"id":%q,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},`+
				`{"id":%q,"type":"function","function":{"name":"get_time","arguments":"{}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`, id1, id2)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"role":"assistant","content":""}`,
			fmt.Sprintf(`{"tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":"get_weather","arguments":""}}]}`, id1),
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Oslo\"}"}}]}`,
			fmt.Sprintf(`{"tool_calls":[{"index":1,"id":%q,"type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, id2),
		} {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
		}
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// toolGateway is a gateway with two replicas in front of the same tool engine (so a rerun
// has somewhere to go).
func toolGateway(t *testing.T, engineURL string) (openai.Client, string) {
	t.Helper()
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{
		{URL: engineURL, Name: "r1"}, {URL: engineURL, Name: "r2"}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(t.Context(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := h1servertest.NewServer(gw.Handler())
	t.Cleanup(func() { srv.Close(); gw.Close() })
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0)), srv.URL
}

func streamToolCalls(t *testing.T, c openai.Client, prompt string, opts ...option.RequestOption) (ids []string, requestID string) {
	t.Helper()
	var resp *http.Response
	opts = append(opts, option.WithResponseInto(&resp))
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	s := c.Chat.Completions.NewStreaming(testCtx(t), params, opts...)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].Function.Arguments != `{"city":"Oslo"}` || calls[1].Function.Name != "get_time" {
		t.Fatalf("streamed tool calls %+v", calls)
	}
	return []string{calls[0].ID, calls[1].ID}, resp.Header.Get("X-Request-Id")
}

// vllmID is an id in vLLM's shape; only its shape matters to ToolCallID.
var vllmID = "chatcmpl-tool-" + strings.Repeat("0", 32)

// Tool call ids are the logical request's: derived from its id and the call's position in
// the engine's own shape, different across requests, equal across a rerun and a replay.
func TestToolCallIDsBelongToTheLogicalRequest(t *testing.T) {
	c, _ := toolGateway(t, toolEngine(t, false))
	vllmShape := regexp.MustCompile(`^chatcmpl-tool-[0-9a-f]{32}$`)

	first, id1 := streamToolCalls(t, c, "weather and time?")
	second, _ := streamToolCalls(t, c, "weather and time?")
	for i := range first {
		if !vllmShape.MatchString(first[i]) || first[i] != gateway.ToolCallID(id1, 0, i, vllmID) {
			t.Fatalf("call %d id %q is not the request's", i, first[i])
		}
		if first[i] == second[i] || first[0] == first[1] {
			t.Fatalf("ids repeat: %v and %v", first, second)
		}
	}

	// A rerun: the first replica fails before any output; the second's calls get the ids
	// the request would have had anyway.
	rerun, idR := streamToolCalls(t, c, "fail first: weather and time?")
	for i := range rerun {
		if rerun[i] != gateway.ToolCallID(idR, 0, i, vllmID) {
			t.Fatalf("rerun call %d id %q differs from the request's", i, rerun[i])
		}
	}

	// A replay of a keyed request: the same ids.
	key := option.WithHeader("Idempotency-Key", "tool-replay-1")
	keyed, idK := streamToolCalls(t, c, "weather and time?", key)
	again, idK2 := streamToolCalls(t, c, "weather and time?", key)
	if idK != idK2 || keyed[0] != again[0] || keyed[1] != again[1] {
		t.Fatalf("replay changed ids: %v (%s) vs %v (%s)", keyed, idK, again, idK2)
	}

	// The whole (non-streamed) answer is rewritten the same way.
	var resp *http.Response
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")}}
	out, err := c.Chat.Completions.New(testCtx(t), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	tc := out.Choices[0].Message.ToolCalls
	idN := resp.Header.Get("X-Request-Id")
	if len(tc) != 2 || tc[0].ID != gateway.ToolCallID(idN, 0, 0, vllmID) || tc[1].ID != gateway.ToolCallID(idN, 0, 1, vllmID) {
		t.Fatalf("tool calls %+v", tc)
	}
}

// An engine with fixed-shape ids (Mistral's nine alphanumeric characters, which its parser
// checks in the next turn) gets ids of that shape.
func TestToolCallIDsKeepTheEnginesShape(t *testing.T) {
	c, _ := toolGateway(t, toolEngine(t, true))
	ids, _ := streamToolCalls(t, c, "weather and time?")
	mistral := regexp.MustCompile(`^[A-Za-z0-9]{9}$`)
	if !mistral.MatchString(ids[0]) || !mistral.MatchString(ids[1]) || ids[0] == ids[1] || strings.HasPrefix(ids[0], "Ab") {
		t.Fatalf("ids %v are not new nine-character ids", ids)
	}
}
