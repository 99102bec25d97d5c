package enginemetrics

import (
	"os"
	"strings"
	"testing"
)

const vllmText = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True"} 1.0
`

const sglangText = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 2.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 1.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 4.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.25
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(vllmText))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Known || s.Running != 3 || s.Waiting != 7 || s.KVUsage != 0.42 || s.CacheConfig["block_size"] != "16" || s.Model != "m" {
		t.Fatalf("vllm %+v", s)
	}
	s, err = Parse(strings.NewReader(sglangText))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Known || s.Running != 3 || s.Waiting != 4 || s.KVUsage != 0.25 || s.CacheConfig != nil {
		t.Fatalf("sglang %+v", s)
	}
	s, err = Parse(strings.NewReader("# TYPE other gauge\nother 1\n"))
	if err != nil || s.Known {
		t.Fatalf("unknown engine %+v %v", s, err)
	}
	if _, err := Parse(strings.NewReader("not { metrics")); err == nil {
		t.Fatal("garbage must not parse")
	}
}

// llamacppText is llama-server's /metrics (version 0.7.0, build 11669, started with
// --metrics --parallel 2) while two requests held both slots and a third waited for one.
// Its counters of generated tokens count finished requests only.
const llamacppText = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 10
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 0
# HELP llamacpp:prompt_seconds_total Total time spent processing prompts
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.006466
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 0
# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 0
# HELP llamacpp:n_decode_total Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 962
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 966
# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 0
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted by the target model
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 0
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 0
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 1546.55
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 0
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 2
`

// llama.cpp's server: its slots in use are the running requests, its deferred tasks the
// waiting ones; an older server's KV cache ratio is read too.
func TestParseLlamacpp(t *testing.T) {
	s, err := Parse(strings.NewReader(llamacppText))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Known || s.Running != 2 || s.Waiting != 1 || s.KVUsage != 0 || s.Engine != "llamacpp" || s.Model != "" || s.CacheConfig != nil {
		t.Fatalf("llamacpp %+v", s)
	}
	older := "# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio 0.5\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"
	s, err = Parse(strings.NewReader(older))
	if err != nil || !s.Known || s.Running != 1 || s.Waiting != 0 || s.KVUsage != 0.5 || s.Engine != "llamacpp" {
		t.Fatalf("older llamacpp %+v %v", s, err)
	}
}

// tgiText is part of TGI's /metrics (the names of its load gauges, as its metrics reference
// lists them).
const tgiText = `# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 3
# TYPE tgi_queue_size gauge
tgi_queue_size 5
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 4096
# TYPE tgi_request_count counter
tgi_request_count 42
`

func TestParseTGI(t *testing.T) {
	s, err := Parse(strings.NewReader(tgiText))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Known || s.Running != 3 || s.Waiting != 5 || s.Engine != "tgi" || s.KVUsage != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}

// vLLM's cache_config_info carries CacheConfig's fields only: the KV cache's dtype and
// block size are the fingerprint facts it gives; nothing about weights or tokenizer.
func TestVLLMCacheConfigFixture(t *testing.T) {
	f, err := os.Open("../discover/testdata/vllm_metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snap, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Engine != "vllm" || snap.Model != "llama-3.1-8b" || snap.Running != 2 ||
		snap.CacheConfig["block_size"] != "16" || snap.CacheConfig["cache_dtype"] != "fp8" {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, k := range []string{"revision", "quantization", "tokenizer", "tensor_parallel_size"} {
		if _, ok := snap.CacheConfig[k]; ok {
			t.Errorf("cache_config_info has no %s label in vLLM", k)
		}
	}
}
