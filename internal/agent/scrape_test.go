package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestLoadAndFingerprintFromMetrics(t *testing.T) {
	cases := map[string]struct {
		text        string
		want        EngineLoad
		fingerprint map[string]string
	}{
		"vllm": {
			text: `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama-3"} 2
vllm:num_requests_running{engine="1",model_name="llama-3"} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama-3"} 4
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama-3"} 0.13
vllm:kv_cache_usage_perc{engine="1",model_name="llama-3"} 0.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="2048"} 1
`,
			want:        EngineLoad{Up: true, Running: 3, Waiting: 4, KVUsage: 0.5},
			fingerprint: map[string]string{"served_model": "llama-3", "block_size": "16", "cache_dtype": "auto", "num_gpu_blocks": "2048"},
		},
		"sglang": {
			text: `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="qwen"} 5
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="qwen"} 7
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="qwen"} 0.42
`,
			want:        EngineLoad{Up: true, Running: 5, Waiting: 7, KVUsage: 0.42},
			fingerprint: map[string]string{"served_model": "qwen"},
		},
		"neither": {
			text:        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12\n",
			want:        EngineLoad{Up: true},
			fingerprint: map[string]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, tc.text)
			}))
			defer engine.Close()
			a := startAgent(t, Config{Engine: engine.URL})
			got, fp, err := a.scrape(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("load %+v, want %+v", got, tc.want)
			}
			if len(fp) != len(tc.fingerprint) {
				t.Fatalf("fingerprint %v, want %v", fp, tc.fingerprint)
			}
			for k, v := range tc.fingerprint {
				if fp[k] != v {
					t.Fatalf("fingerprint %v, want %v", fp, tc.fingerprint)
				}
			}
		})
	}
}

// An engine that is not there is reported down, with the reason, and the
// renewal is still answered.
func TestEngineDownReportedInRenewal(t *testing.T) {
	a := startAgent(t, Config{Engine: "http://127.0.0.1:1"})
	a.scrapeOnce(testContext(t))
	reply := renew(t, controlClient(t, a, ""), time.Second)
	if reply.Engine.Up || reply.Engine.Error == "" {
		t.Fatalf("engine load %+v, want down with an error", reply.Engine)
	}
}
