package gateway_test

import (
	"context"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
)

// llama.cpp's prompt cache is correct: with the canary's cache check, two llama-server
// replicas stay agrees, check after check; the pairs show in the engines' own metrics —
// every answer decoded, and the warm prompts mostly reused rather than evaluated again.
// llama.cpp reports no block size, so the check straddles cache_block_size (16): prompts of
// 31, 33, 47 and 49 tokens, counted by its /tokenize.
func TestLlamacppCanaryCacheCheckAgrees(t *testing.T) {
	const maxTokens = 6
	e := newLlamaEnv(t, 2, func(c *config.Config) {
		c.Models[0].Canary = &config.Canary{Every: config.Duration(3600e9), MaxTokens: maxTokens, CompareTokens: maxTokens}
	})
	e.refresh() // the scrape tells the gateway the engines are llama.cpp: their /tokenize's shape
	ctx := testCtx(t)
	before := make([]map[string]float64, len(e.engines))
	for i, s := range e.engines {
		m, err := s.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before[i] = m
	}
	const checks = 3
	for range checks {
		e.gw.CheckCanaries(context.Background())
		for _, n := range []string{"llama-1", "llama-2"} {
			if c := e.canaryOf(n); c["state"] != "agrees" || c["cache_check"] != "agrees" {
				t.Fatalf("%s: %v", n, c)
			}
		}
	}
	const lengths = 31 + 33 + 47 + 49
	for i, s := range e.engines {
		m, err := s.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		predicted := m["llamacpp:tokens_predicted_total"] - before[i]["llamacpp:tokens_predicted_total"]
		evaluated := m["llamacpp:prompt_tokens_total"] - before[i]["llamacpp:prompt_tokens_total"]
		// Per check: eight probes of the pairs and the group probe, each maxTokens long.
		if predicted < checks*8*maxTokens {
			t.Errorf("llama-%d decoded %v tokens, want at least %d", i+1, predicted, checks*8*maxTokens)
		}
		// Cold prompts are evaluated whole; a warm one only past its reused prefix. Were
		// nothing reused, the pairs alone would come to twice their lengths.
		if evaluated >= checks*2*lengths {
			t.Errorf("llama-%d evaluated %v prompt tokens: the warm prompts were not reused", i+1, evaluated)
		}
	}
}
