package gateway_test

import (
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
)

// Embeddings through the gateway: answered by a replica, and rerun on another when the
// first fails (an embedding is never streamed, so nothing was delivered).
func TestEmbeddings(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.Task = sim.TaskEmbed },
		config: func(c *config.Config) { c.Models[0].Replicas[1].Priority = 1 }})
	params := openai.EmbeddingNewParams{Model: "sim-model",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "second text"}}}
	got, err := e.client.Embeddings.New(testCtx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 2 || len(got.Data[0].Embedding) == 0 || got.Data[1].Index != 1 {
		t.Fatalf("embeddings %+v", got)
	}
	if err := e.sims[0].ArmFault("crash@accept", 1); err != nil { // the first replica fails
		t.Fatal(err)
	}
	again, err := e.client.Embeddings.New(testCtx(t), params)
	if err != nil {
		t.Fatalf("no rerun after a replica died: %v", err)
	}
	// The rerun's vectors are the second replica's own.
	for i, text := range []string{"first text", "second text"} {
		want := sim.Embedding("sim-2", text, len(again.Data[i].Embedding))
		for j, v := range again.Data[i].Embedding {
			if float32(v) != want[j] {
				t.Fatalf("input %d: not sim-2's vector", i)
			}
		}
	}
}

// Text completions, whole and streamed, through the gateway.
func TestCompletionsEndpoint(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := openai.CompletionNewParams{Model: "sim-model", MaxTokens: openai.Int(5),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}}
	whole, err := e.client.Completions.New(testCtx(t), p)
	if err != nil || whole.Choices[0].Text == "" || whole.Choices[0].FinishReason != "length" {
		t.Fatalf("completion %+v %v", whole, err)
	}
	s := e.client.Completions.NewStreaming(testCtx(t), p)
	text := ""
	for s.Next() {
		for _, c := range s.Current().Choices {
			text += c.Text
		}
	}
	if s.Err() != nil || text != whole.Choices[0].Text {
		t.Fatalf("streamed %q (%v), whole %q", text, s.Err(), whole.Choices[0].Text)
	}
}
