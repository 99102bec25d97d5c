package bench

import (
	"math/rand/v2"
	"testing"
)

func msSamples(vs ...int64) []int64 {
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = v * 1e6
	}
	return out
}

func TestPercentilesAreNearestRank(t *testing.T) {
	seq := func(n int) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(i+1) * 1e6
		}
		// Shuffled, so that the sort is what orders them.
		rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })
		return s
	}
	for _, tc := range []struct {
		name    string
		samples []int64
		want    Percentiles
	}{
		{"none", nil, Percentiles{}},
		{"one", msSamples(7), Percentiles{Count: 1, Mean: 7, P50: 7, P90: 7, P99: 7, P999: 7, Max: 7}},
		{"two", msSamples(2, 1), Percentiles{Count: 2, Mean: 1.5, P50: 1, P90: 2, P99: 2, P999: 2, Max: 2}},
		{"ten", msSamples(7, 1, 3, 9, 5, 2, 8, 4, 10, 6), Percentiles{Count: 10, Mean: 5.5, P50: 5, P90: 9, P99: 10, P999: 10, Max: 10}},
		{"1000", seq(1000), Percentiles{Count: 1000, Mean: 500.5, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}},
		{"1001", seq(1001), Percentiles{Count: 1001, Mean: 501, P50: 501, P90: 901, P99: 991, P999: 1000, Max: 1001}},
		{"100000", seq(100000), Percentiles{Count: 100000, Mean: 50000.5, P50: 50000, P90: 90000, P99: 99000, P999: 99900, Max: 100000}},
		{"ties", msSamples(3, 3, 3, 1, 3), Percentiles{Count: 5, Mean: 2.6, P50: 3, P90: 3, P99: 3, P999: 3, Max: 3}},
	} {
		if got := percentiles(tc.samples); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Sub-millisecond samples keep their nanoseconds.
	if got := percentiles([]int64{1500, 2500}); got.P50 != 0.0015 || got.Max != 0.0025 {
		t.Errorf("nanoseconds: %+v", got)
	}
}

func TestMediansAndRatios(t *testing.T) {
	runs := func(rps ...float64) []*Result {
		var out []*Result
		for _, v := range rps {
			out = append(out, &Result{RequestsPerSecond: v, Failed: 1, TTFT: Percentiles{Count: 1, P50: v / 100}})
		}
		return out
	}
	base := medians(runs(30, 10, 20))
	if base["requests_per_second"] != 20 || base["ttft_p50_ms"] != 0.2 || base["failed"] != 1 {
		t.Fatalf("odd count: %v", base)
	}
	if _, ok := base["inter_token_p50_ms"]; ok {
		t.Fatalf("a median of no samples: %v", base)
	}
	if _, ok := base["cpu_per_request_ms"]; ok {
		t.Fatalf("a CPU median without a process: %v", base)
	}
	other := medians(runs(40, 10, 30, 20))
	if other["requests_per_second"] != 25 {
		t.Fatalf("even count: %v", other)
	}
	r := ratios(other, base)
	if r["requests_per_second"] != 1.25 || r["failed"] != 1 {
		t.Fatalf("ratios %v", r)
	}
	if _, ok := ratios(map[string]float64{"failed": 3}, map[string]float64{"failed": 0})["failed"]; ok {
		t.Fatal("a ratio to zero")
	}
}

func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		// The gateway's interruption, and OpenAI's errors.
		{`{"error":{"message":"m","type":"upstream_error","param":null,"code":"upstream_decode_interrupted"}}`, "upstream_decode_interrupted"},
		{`{"error":{"message":"m","type":"invalid_request_error","param":null,"code":null}}`, "invalid_request_error"},
		// vLLM: the code is the HTTP status.
		{`{"error": {"message": "m", "type": "InternalServerError", "param": null, "code": 500}}`, "InternalServerError"},
		{`{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}`, "BadRequestError"},
		{`{"error":{"message":"m","code":503}}`, "503"},
		// Anthropic, plain and as the gateway sends an interruption.
		{`{"type":"error","error":{"type":"overloaded_error","message":"m"}}`, "overloaded_error"},
		{`{"type":"error","error":{"type":"api_error","message":"m","code":"upstream_decode_interrupted"}}`, "upstream_decode_interrupted"},
		// The Responses API's error event and response.failed.
		{`{"type":"error","code":"upstream_decode_interrupted","message":"m","param":null,"sequence_number":12}`, "upstream_decode_interrupted"},
		{`{"type":"response.failed","sequence_number":13,"response":{"status":"failed","error":{"code":"server_error","message":"m"}}}`, "server_error"},
		// TGI, and what has no code at all.
		{`{"error":"Input validation error","error_type":"validation"}`, "validation"},
		{`{"error":"something"}`, "unknown"},
		{`<html>502 Bad Gateway</html>`, "unknown"},
		{``, "unknown"},
	} {
		if got := eventErrorCode([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		base string
		api  API
		want string
	}{
		{"http://127.0.0.1:8080", Chat, "http://127.0.0.1:8080/v1/chat/completions"},
		{"http://127.0.0.1:8080/", Completions, "http://127.0.0.1:8080/v1/completions"},
		{"http://127.0.0.1:8080/v1", Messages, "http://127.0.0.1:8080/v1/messages"},
		{"https://example.test/api/v1/", Responses, "https://example.test/api/v1/responses"},
	} {
		if got, err := endpoint(tc.base, tc.api); err != nil || got != tc.want {
			t.Errorf("%s %s: %q %v, want %q", tc.base, tc.api, got, err, tc.want)
		}
	}
}
