package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The count of a prompt's tokens (for the rerun cost limit) is asked of an engine in the
// background: an engine whose /tokenize never answers delays the first attempt by the
// tokenize timeout at most, and a client that leaves meanwhile is let go at once, with no
// attempt started.
func TestTokenizeNeverBlocksTheRequest(t *testing.T) {
	var chats atomic.Int64
	tokenizing := make(chan struct{}, 4)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tokenize":
			io.ReadAll(r.Body) // so that the server notices when the gateway gives up
			tokenizing <- struct{}{}
			<-r.Context().Done() // never answers
		case "/v1/chat/completions":
			chats.Add(1)
			io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
		}
	}))
	defer engine.Close()
	cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{{URL: engine.URL}}}}}
	cfg.Policy.MaxRerunPrefillTokens = 100
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := h1servertest.NewServer(gw.Handler())
	defer func() { srv.Close(); gw.Close() }()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	// About 100 tokens by the estimate: close enough to the limit to ask for a count.
	prompt := strings.Repeat("abcd", 100)
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}

	// The client leaves while the count is pending: the request ends, nothing was sent.
	ctx, cancel := context.WithCancel(testCtx(t))
	var resp *http.Response
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
		done <- err
	}()
	<-tokenizing
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled request got an answer")
	}

	// The count never comes: the request goes on with the estimate after the timeout.
	out, err := c.Chat.Completions.New(testCtx(t), params)
	if err != nil || out.Choices[0].Message.Content != "ok" {
		t.Fatalf("answer %+v %v", out, err)
	}
	if n := chats.Load(); n != 1 {
		t.Fatalf("the engine got %d chat requests, want 1 (none for the cancelled one)", n)
	}
}
