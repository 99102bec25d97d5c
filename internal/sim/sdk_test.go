package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOfficialClient checks the wire format against the official OpenAI Go
// SDK, the client the gateway's own tests use.
func TestOfficialClient(t *testing.T) {
	s := startSim(t, Config{Name: "sdk"})
	client := openai.NewClient(
		option.WithBaseURL(s.URL()+"/v1"),
		option.WithAPIKey("unused"),
		option.WithHTTPClient(newClient(t)),
		option.WithMaxRetries(0),
	)
	ctx := testContext(t)
	prompt := RenderChat([]Message{{Role: "user", Content: "hello sdk"}})
	want := strings.Join(Tokens("sdk", 0, prompt, 6), "")
	params := openai.ChatCompletionNewParams{
		Model:     "sim-model",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello sdk")},
		MaxTokens: openai.Int(6),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{
			IncludeUsage: openai.Bool(true),
		},
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "length" {
		t.Errorf("streamed completion = %+v, want %q", acc.Choices, want)
	}
	if acc.Usage.CompletionTokens != 6 || acc.Usage.PromptTokens != 7 {
		t.Errorf("usage = %+v", acc.Usage)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	done, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("non-stream: %v", err)
	}
	if done.Choices[0].Message.Content != want || done.Usage.TotalTokens != 13 {
		t.Errorf("non-stream completion = %+v", done)
	}

	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "sim-model",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("plain prompt")},
		MaxTokens: openai.Int(3),
	})
	if err != nil {
		t.Fatalf("completions: %v", err)
	}
	if comp.Choices[0].Text != strings.Join(Tokens("sdk", 0, "plain prompt", 3), "") {
		t.Errorf("completion text = %q", comp.Choices[0].Text)
	}

	// A mid-stream error event surfaces as an error from the SDK's stream.
	errStream := client.Chat.Completions.NewStreaming(ctx, params, option.WithHeader("X-Sim-Fault", "status:500@sent:1"))
	n := 0
	for errStream.Next() {
		n++
	}
	if errStream.Err() == nil || n != 3 { // role, token 0, token 1
		t.Errorf("after %d chunks the stream error is %v, want an error after 3 chunks", n, errStream.Err())
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "missing",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("unknown model: %v, want a 404 API error", err)
	}
}
