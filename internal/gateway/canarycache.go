package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"

	"github.com/fencegate/fencegate/internal/canary"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/tidwall/gjson"
)

// The canary's cache check (docs/design.md §3): every replica answers a greedy prompt twice,
// cold (a fresh nonce at its start, so no block of it is cached) and warm (the same prompt
// right after, its prefix now cached), at prompt lengths on both sides of multiples of its
// engine's KV block size, counted by the engine's own tokenizer. A correct cache changes no
// answer; a replica whose answer changes, also when asked again, is cache_diverges: kept
// from reruns (or from all work), and its cache no longer counted on by prefix affinity.
// The comparison is the pure core's (internal/canary); this file sends the probes.

// cacheEvidence is what a cache_diverges verdict shows: the pair that differed twice.
type cacheEvidence struct {
	PromptTokens int    `json:"prompt_tokens"`
	BlockSize    int    `json:"block_size"`
	Position     int    `json:"first_differing_token"`
	Cold         string `json:"cold_answer"`
	Warm         string `json:"warm_answer"`
}

// blockOf is the KV block size the cache check straddles for the replica, and where it
// came from: the engine's (vLLM's block_size, SGLang's page_size, both in its fingerprint),
// else the configured cache_block_size. Callers hold mu.
func (p *pool) blockOf(name string, fallback int) (int, string) {
	if r := p.b.Find(name); r != nil {
		if n, err := strconv.Atoi(r.Fingerprint["block_size"]); err == nil && n > 0 {
			return n, "engine"
		}
	}
	return fallback, "cache_block_size"
}

// checkCaches runs the cache check on every target at once, each target's pairs one after
// another (a warm probe must follow its cold one), and returns the verdicts by name.
func (s *Server) checkCaches(ctx context.Context, p *pool, cfg config.Canary, targets []canaryTarget) map[string]canary.CacheVerdict {
	out := make([]canary.CacheVerdict, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.checkCache(ctx, p.b.Model, cfg, t)
		}()
	}
	wg.Wait()
	verdicts := make(map[string]canary.CacheVerdict, len(targets))
	for i, t := range targets {
		verdicts[t.name] = out[i]
	}
	return verdicts
}

// checkCache sends one replica its pairs, and again the pairs of the lengths that differed.
func (s *Server) checkCache(ctx context.Context, model string, cfg config.Canary, t canaryTarget) canary.CacheVerdict {
	opts := canary.Options{CompareTokens: cfg.CompareTokens, MaxLogprobDistance: cfg.MaxLogprobDistance}
	round := func(lengths []int) canary.CacheVote {
		pairs := make([]canary.Pair, 0, len(lengths))
		for _, n := range lengths {
			pairs = append(pairs, s.probePair(ctx, model, cfg, t, n))
			if ctx.Err() != nil {
				break
			}
		}
		return canary.JudgeCache(pairs, opts)
	}
	first := round(canary.CacheLengths(t.block, cfg.CacheBlocks))
	var again canary.CacheVote
	if len(first.Differing) > 0 {
		lengths := make([]int, len(first.Differing))
		for i, d := range first.Differing {
			lengths[i] = d.Length
		}
		again = round(lengths)
	}
	v := canary.JudgeCacheRounds(first, again, t.block)
	if v.Detail != "" && t.blockFrom != "engine" {
		v.Detail += fmt.Sprintf(" (block size %d from cache_block_size: the engine reports none)", t.block)
	}
	return v
}

// probePair builds a prompt of n tokens behind a fresh nonce and sends it twice.
func (s *Server) probePair(ctx context.Context, model string, cfg config.Canary, t canaryTarget, n int) canary.Pair {
	pair := canary.Pair{Length: n}
	// Short, so that the pair's lengths fit behind it under a tokenizer of bytes too; 32
	// random bits keep any earlier prompt from sharing its first block.
	hex := fmt.Sprintf("%08x", rand.Uint32())
	nonce := hex + ":"
	prompt, err := s.fitCachePrompt(ctx, model, t, nonce, n)
	if err != nil {
		pair.Cold.Err = err.Error()
		return pair
	}
	id := fmt.Sprintf("canary_cache_%s_%s", t.name, hex)
	if pair.Cold = s.probeCompletion(ctx, model, cfg, t.target, prompt, id+"_cold"); pair.Cold.Err == "" {
		pair.Warm = s.probeCompletion(ctx, model, cfg, t.target, prompt, id+"_warm")
	}
	return pair
}

// fitCachePrompt finds the prompt behind nonce that the engine's tokenizer counts as n
// tokens (see canary.PromptFit).
func (s *Server) fitCachePrompt(ctx context.Context, model string, t canaryTarget, nonce string, n int) (string, error) {
	f := canary.NewPromptFit(n)
	for !f.Done {
		count, err := s.countTokens(ctx, model, t, f.Prompt(nonce))
		if err != nil {
			return "", fmt.Errorf("counting the prompt's tokens: %w", err)
		}
		f.Observe(count)
	}
	if !f.Found {
		return "", fmt.Errorf("the engine's tokenizer counts no prompt of the filler text as %d tokens", n)
	}
	return f.Prompt(nonce), nil
}

// countTokens asks the engine's tokenizer how many tokens the completions endpoint makes of
// prompt, special tokens included: vLLM's and SGLang's POST /tokenize {"model","prompt"},
// llama.cpp's POST /tokenize {"content","add_special"}; all answer {"tokens":[…]}.
func (s *Server) countTokens(ctx context.Context, model string, t canaryTarget, prompt string) (int, error) {
	body := map[string]any{"model": model, "prompt": prompt}
	if t.engine == "llamacpp" {
		body = map[string]any{"content": prompt, "add_special": true}
	}
	b, err := s.canaryPost(ctx, t.target, "/tokenize", body, "")
	if err != nil {
		return 0, err
	}
	tokens := gjson.GetBytes(b, "tokens")
	if !tokens.IsArray() {
		return 0, fmt.Errorf("no tokens in the answer")
	}
	return len(tokens.Array()), nil
}

// probeCompletion asks the replica to complete prompt greedily: a text completion (which
// every engine tokenizes as its /tokenize does, with no chat template), temperature 0 and
// the canary's seed, its answer and logprobs.
func (s *Server) probeCompletion(ctx context.Context, model string, cfg config.Canary, tg target, prompt, id string) canary.Answer {
	b, err := s.canaryPost(ctx, tg, "/v1/completions", map[string]any{
		"model":       model,
		"prompt":      prompt,
		"temperature": 0,
		"seed":        canarySeed,
		"max_tokens":  cfg.MaxTokens,
		"logprobs":    1,
		"stream":      false,
		"user":        canaryUser,
	}, id)
	if err != nil {
		return canary.Answer{Err: err.Error()}
	}
	choice := gjson.GetBytes(b, "choices.0")
	if !choice.Exists() {
		return canary.Answer{Err: "no choice in the answer"}
	}
	a := canary.Answer{Text: choice.Get("text").String()}
	if lp := choice.Get("logprobs"); lp.Get("tokens").IsArray() {
		// The completions API's own shape (vLLM, SGLang).
		for _, t := range lp.Get("tokens").Array() {
			a.Tokens = append(a.Tokens, t.String())
		}
		for _, l := range lp.Get("token_logprobs").Array() {
			a.Logprobs = append(a.Logprobs, l.Float())
		}
	} else {
		lp.Get("content").ForEach(func(_, t gjson.Result) bool { // llama.cpp's
			a.Tokens = append(a.Tokens, t.Get("token").String())
			a.Logprobs = append(a.Logprobs, t.Get("logprob").Float())
			return true
		})
	}
	return a
}

// canaryPost sends one of the canary's own requests, marked as such (id: its request id, a
// fresh one when empty), and returns the body of a 200 answer.
func (s *Server) canaryPost(ctx context.Context, tg target, path string, body map[string]any, id string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, canaryTimeout)
	defer cancel()
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("canary %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if id == "" {
		// A request id of its own kind, so that a probe in an engine's log is never taken
		// for a client's request (whose ids are req_…).
		id = fmt.Sprintf("canary_%s_%016x", tg.name, rand.Uint64())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", canaryUser)
	req.Header.Set(canaryHeader, "1")
	req.Header.Set("X-Request-Id", id)
	tg.setCredentials(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, truncate(string(b), 200))
	}
	return b, nil
}

// withCache folds a replica's cache verdict into its group verdict: a cache that changes
// answers marks the replica cache_diverges unless its group already says it diverges; a
// cache check that agreed, or could not be made, leaves the group's state as it is.
func withCache(v canaryResult, c canary.CacheVerdict) canaryResult {
	v.CacheState = c.State
	switch {
	case c.State == canary.CacheDiverges && v.State != canary.Diverges:
		e := c.Evidence
		v.State, v.Position, v.Tie, v.Text, v.Majority = canary.CacheDiverges, e.Position, false, "", ""
		v.Detail = c.Detail
		v.Cache = &cacheEvidence{PromptTokens: e.Length, BlockSize: c.Block, Position: e.Position,
			Cold: e.Cold.Text, Warm: e.Warm.Text}
	case c.Detail != "":
		v.Detail = joinDetail(v.Detail, c.Detail)
	}
	return v
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
