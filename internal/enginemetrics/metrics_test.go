package enginemetrics

import (
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
