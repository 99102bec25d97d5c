package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Some OpenAI-compatible servers put "error": null in every chunk. The official Go SDK
// takes any "error" key for an error, so the gateway removes it: the client must see the
// answer, not a failure.
func TestNullErrorKeyIsStripped(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{`{"role":"assistant","content":""}`, `{"content":"Hello"}`, `{"content":" world"}`} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}],\"error\":null}\n\n", c)
		}
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"error\":null}\n\ndata: [DONE]\n\n")
	}))
	defer engine.Close()
	c := scriptedGateway(t, engine.URL)
	s := c.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	text := ""
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text += ch.Delta.Content
		}
	}
	if s.Err() != nil || text != "Hello world" {
		t.Fatalf("client saw %q, err %v", text, s.Err())
	}
}

// scriptedGateway is a gateway in front of one scripted engine (model "m"), and an official
// client pointed at it.
func scriptedGateway(t *testing.T, engineURL string) openai.Client {
	t.Helper()
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{{URL: engineURL}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	srv := h1servertest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
}
