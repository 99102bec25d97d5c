package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// n = 2 through the gateway: both choices arrive whole, and the stream completes only
// after both finished.
func TestSeveralChoicesStream(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := chatParams("two answers please", 5)
	p.N = openai.Int(2)
	var resp *http.Response
	s := e.client.Chat.Completions.NewStreaming(testCtx(t), p, option.WithResponseInto(&resp))
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if len(acc.Choices) != 2 || acc.Choices[0].FinishReason != "length" || acc.Choices[1].FinishReason != "length" ||
		acc.Choices[0].Message.Content == acc.Choices[1].Message.Content {
		t.Fatalf("choices %+v", acc.Choices)
	}
	words := len(strings.Fields(acc.Choices[0].Message.Content)) + len(strings.Fields(acc.Choices[1].Message.Content))
	if rec := e.record(resp.Header.Get("X-Request-Id")); rec.Outcome != "completed" || rec.DeliveredOutputTokens != words || words != 10 {
		t.Fatalf("journal %+v, client received %d tokens", rec, words)
	}
}

// A completions prompt array: one choice per prompt, each finished.
func TestPromptArray(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.client.Completions.NewStreaming(testCtx(t), openai.CompletionNewParams{
		Model:     "sim-model",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"first prompt", "second prompt"}},
		MaxTokens: openai.Int(4),
	})
	finished := map[int64]string{}
	text := map[int64]string{}
	for s.Next() {
		for _, c := range s.Current().Choices {
			text[c.Index] += c.Text
			if c.FinishReason != "" {
				finished[c.Index] = string(c.FinishReason)
			}
		}
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if len(finished) != 2 || text[0] == "" || text[1] == "" {
		t.Fatalf("finished %v text %v", finished, text)
	}
}

// A stream cut after one of two choices finished is an interruption, never a [DONE]: the
// engine's EOF and its [DONE] alike.
func TestCutAfterOneChoiceIsInterrupted(t *testing.T) {
	for _, ending := range []string{"", "data: [DONE]\n\n"} {
		engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/chat/completions" {
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range []string{
				`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`,
				`{"index":1,"delta":{"role":"assistant","content":""},"finish_reason":null}`,
				`{"index":0,"delta":{"content":"alpha"},"finish_reason":null}`,
				`{"index":1,"delta":{"content":"beta"},"finish_reason":null}`,
				`{"index":0,"delta":{},"finish_reason":"stop"}`,
			} {
				fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[%s]}\n\n", c)
			}
			io.WriteString(w, ending)
		}))
		c := scriptedGateway(t, engine.URL)
		p := openai.ChatCompletionNewParams{Model: "m", N: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("two")}}
		s := c.Chat.Completions.NewStreaming(testCtx(t), p)
		for s.Next() {
		}
		ev := interruption(t, s.Err())
		if ev["code"] != "upstream_decode_interrupted" || ev["partial_output"] != true || ev["delivered_output_tokens"] != float64(2) {
			t.Fatalf("ending %q: interruption %v", ending, ev)
		}
		engine.Close()
	}
}

// Several tokens per chunk (vLLM's --stream-interval): delivered_output_tokens counts
// tokens, from the usage the gateway asks the engine for, and the client sees no usage it
// did not ask for.
func TestMultiTokenChunksCountTokens(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.StreamInterval = 4 }})
	r, raw := rawStream(t, e.srv.URL, `{"model":"sim-model","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"count me"}]}`)
	if strings.Contains(raw, `"usage"`) || !strings.HasSuffix(raw, "data: [DONE]\n\n") {
		t.Fatalf("stream %q", raw)
	}
	if rec := e.record(r); rec.DeliveredOutputTokens != 10 || rec.Outcome != "completed" {
		t.Fatalf("journal %+v", rec)
	}
	// The client that asked for usage gets the final usage chunk, and only that one.
	_, raw = rawStream(t, e.srv.URL, `{"model":"sim-model","stream":true,"max_tokens":10,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count me"}]}`)
	if strings.Count(raw, `"usage"`) != 1 || !strings.Contains(raw, `"choices":[],"usage":{`) {
		t.Fatalf("stream %q", raw)
	}
	// Cut in the middle: the journal says how many tokens the client got, not how many
	// chunks.
	e.armAll("crash@sent:5")
	s := e.client.Chat.Completions.NewStreaming(testCtx(t), chatParams("cut me", 12))
	var content string
	for s.Next() {
		for _, c := range s.Current().Choices {
			content += c.Delta.Content
		}
	}
	ev := interruption(t, s.Err())
	words := len(strings.Fields(content))
	if words < 6 || ev["delivered_output_tokens"] != float64(words) {
		t.Fatalf("client got %d tokens, interruption says %v", words, ev["delivered_output_tokens"])
	}
	if rec := e.record(ev["request_id"].(string)); rec.DeliveredOutputTokens != words {
		t.Fatalf("journal %+v, client %d tokens", rec, words)
	}
}

// rawStream posts body to the gateway and returns the request id and the whole response.
func rawStream(t *testing.T, url, body string) (string, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return resp.Header.Get("X-Request-Id"), b.String()
}
