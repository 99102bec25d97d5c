package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// /v1/models is vLLM's card: the revision shows only in root, the path the weights were
// loaded from, and nothing else about the replica is added.
func TestModelsEndpoint(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		root string
	}{
		{Config{Model: "llama-sim"}, "llama-sim"},
		{Config{Model: "llama-sim", Revision: "abc123"}, "/models/hub/models--fencegate--llama-sim/snapshots/abc123"},
		{Config{Model: "llama-sim", Revision: "abc123", ModelPath: "/weights/x"}, "/weights/x"},
	} {
		s := startSim(t, tc.cfg)
		status, b := getBody(t, newClient(t), s.URL()+"/v1/models")
		if status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		var list struct {
			Object string           `json:"object"`
			Data   []map[string]any `json:"data"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		if list.Object != "list" || len(list.Data) != 1 {
			t.Fatalf("list = %s", b)
		}
		m := list.Data[0]
		if m["id"] != "llama-sim" || m["object"] != "model" || m["owned_by"] != "vllm" || m["root"] != tc.root ||
			m["max_model_len"] != float64(maxModelLen) || m["parent"] != nil {
			t.Errorf("model card = %v, want root %q", m, tc.root)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := []string{"created", "id", "max_model_len", "object", "owned_by", "parent", "permission", "root"}; !slices.Equal(keys, want) {
			t.Errorf("card keys %v, vLLM's are %v", keys, want)
		}
	}
}

// GET /version answers as vLLM's show_version.
func TestVersionEndpoint(t *testing.T) {
	for cfg, want := range map[*Config]string{{}: DefaultVersion, {Version: "0.9.2"}: "0.9.2"} {
		s := startSim(t, *cfg)
		status, b := getBody(t, newClient(t), s.URL()+"/version")
		if status != http.StatusOK || string(b) != `{"version":"`+want+`"}` {
			t.Errorf("/version: %d %s, want %s", status, b, want)
		}
	}
}

// Replicas with the same Weights answer alike whatever their names; other Weights answer
// otherwise; DivergeFirst answers otherwise once, then as the Weights again.
func TestWeightsDecideTheText(t *testing.T) {
	answer := func(s *Server) string {
		body := jsonBody(t, map[string]any{"model": "sim-model", "prompt": "count with me", "max_tokens": 8, "temperature": 0, "seed": 7})
		status, b := postJSON(t, newClient(t), s.URL()+"/v1/completions", body, nil)
		var r struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
			t.Fatalf("%d %s", status, b)
		}
		return r.Choices[0].Text
	}
	a := startSim(t, Config{Name: "a", Weights: "w1"})
	b := startSim(t, Config{Name: "b", Weights: "w1"})
	c := startSim(t, Config{Name: "c", Weights: "w2"})
	d := startSim(t, Config{Name: "d", Weights: "w1", DivergeFirst: 1})
	want := answer(a)
	if got := answer(b); got != want {
		t.Errorf("same weights: %q and %q", got, want)
	}
	if got := answer(c); got == want {
		t.Errorf("other weights answered alike: %q", got)
	}
	if got := answer(d); got == want {
		t.Errorf("the first answer of DivergeFirst agreed: %q", got)
	}
	if got := answer(d); got != want {
		t.Errorf("after DivergeFirst: %q, want %q", got, want)
	}
	if got := answer(startSim(t, Config{Name: "e"})); got == answer(startSim(t, Config{Name: "f"})) {
		t.Errorf("replicas named apart answered alike: %q", got)
	}
}

func TestTokenizeEndpoint(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	type reply struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}
	tokenize := func(body string) (int, reply) {
		status, b := postJSON(t, c, s.URL()+"/tokenize", []byte(body), nil)
		var r reply
		if status == http.StatusOK {
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
		}
		return status, r
	}
	status, r := tokenize(`{"model":"sim-model","prompt":"Hello, world!"}`)
	if status != 200 || r.Count != 4 || len(r.Tokens) != 4 || r.MaxModelLen != maxModelLen {
		t.Errorf("prompt: status %d, %+v", status, r)
	}
	_, chat := tokenize(`{"model":"sim-model","messages":[{"role":"user","content":"Hello there"}]}`)
	if chat.Count != 7 || chat.Tokens[0] != imStartID {
		t.Errorf("messages: %+v, want 7 tokens starting with <|im_start|>", chat)
	}
	// The count is the prompt_tokens a completion of the same input reports.
	_, b := postJSON(t, c, s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("Hello there", map[string]any{"max_tokens": 1})), nil)
	var done struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(b, &done)
	if done.Usage.PromptTokens != chat.Count {
		t.Errorf("usage.prompt_tokens = %d, /tokenize count = %d", done.Usage.PromptTokens, chat.Count)
	}
	if status, _ := tokenize(`{"model":"other","prompt":"x"}`); status != http.StatusNotFound {
		t.Errorf("unknown model: %d, want 404", status)
	}
	if status, _ := tokenize(`{"model":"sim-model"}`); status != http.StatusBadRequest {
		t.Errorf("no input: %d, want 400", status)
	}
}

func TestMetricsExposition(t *testing.T) {
	s := startSim(t, Config{Model: "m1", CacheConfig: map[string]string{"cache_dtype": "fp8"}})
	c := newClient(t)
	body := jsonBody(t, map[string]any{"model": "m1", "prompt": "a b c", "max_tokens": 2})
	postJSON(t, c, s.URL()+"/v1/completions", body, nil)
	waitRecord(t, s, ended)
	m := scrape(t, s)
	labels := `model_name="m1"`
	for name, want := range map[string]float64{
		"vllm:num_requests_running":       0,
		"vllm:num_requests_waiting":       0,
		"vllm:kv_cache_usage_perc":        0,
		"vllm:prefix_cache_queries_total": 3,
		"vllm:prefix_cache_hits_total":    0,
		"vllm:prompt_tokens_total":        3,
		"vllm:generation_tokens_total":    2,
	} {
		if got := metricValue(t, m, name, labels); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricValue(t, m, "vllm:request_success_total", labels, `finished_reason="length"`); got != 1 {
		t.Errorf("request_success{length} = %v, want 1", got)
	}
	if got := metricValue(t, m, "vllm:cache_config_info", `block_size="16"`, `cache_dtype="fp8"`, `enable_prefix_caching="True"`, `engine="0"`); got != 1 {
		t.Errorf("cache_config_info = %v, want 1", got)
	}
	// Only CacheConfig's fields: what vLLM knows as the model, its revision, quantization,
	// tokenizer or chat template is not in this gauge.
	for _, l := range []string{"revision=", "quantization=", "tokenizer=", "chat_template=", "tensor_parallel_size="} {
		if strings.Contains(string(m), l) {
			t.Errorf("the metrics carry %s, which vLLM's do not", l)
		}
	}
	if !strings.Contains(string(m), "# TYPE vllm:prefix_cache_hits_total counter") {
		t.Error("prefix_cache_hits_total is not exposed as a counter")
	}
}

func TestKVCacheUsageWhileRunning(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	progress := make(chan int, 10)
	done := make(chan observation, 1)
	ctx, cancel := context.WithCancel(testContext(t))
	body := jsonBody(t, map[string]any{"model": "sim-model", "prompt": strings.Repeat("w ", 40), "stream": true})
	hold := newPost(t, ctx, s.URL()+"/v1/completions", body, map[string]string{"X-Sim-Fault": "hang@sent:1"})
	go func() { done <- observe(ctx, c, hold, progress) }()
	waitProgress(t, progress, 2)
	// 40 prompt tokens and 2 output tokens fill 3 blocks of 16 out of 2048.
	if got := metricValue(t, scrape(t, s), "vllm:kv_cache_usage_perc"); got != 3.0/2048 {
		t.Errorf("kv_cache_usage_perc = %v, want %v", got, 3.0/2048)
	}
	cancel()
	<-done
}

func TestValidationErrors(t *testing.T) {
	s := startSim(t, Config{})
	c := newClient(t)
	cases := []struct {
		name   string
		path   string
		body   string
		status int
		want   string // in the message
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model":`, 400, "JSON decode error"},
		{"wrong type", "/v1/chat/completions", `{"model":"sim-model","messages":[],"max_tokens":"x"}`, 400, "JSON decode error"},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "model"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, 404, "The model `gpt-9` does not exist."},
		{"no messages", "/v1/chat/completions", `{"model":"sim-model"}`, 400, "messages"},
		{"n < 1", "/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":"x"}],"n":0}`, 400, "n must be at least 1"},
		{"empty prompt list", "/v1/completions", `{"model":"sim-model","prompt":[]}`, 400, "prompt"},
		{"token id out of vocabulary", "/v1/completions", `{"model":"sim-model","prompt":[1,2,99999999]}`, 400, "Token id 99999999 is out of vocabulary"},
		{"max_tokens 0", "/v1/completions", `{"model":"sim-model","prompt":"x","max_tokens":0}`, 400, "max_tokens must be at least 1"},
		{"negative temperature", "/v1/completions", `{"model":"sim-model","prompt":"x","temperature":-1}`, 400, "temperature"},
		{"stream_options without stream", "/v1/completions", `{"model":"sim-model","prompt":"x","stream_options":{"include_usage":true}}`, 400, "stream=True"},
		{"no prompt", "/v1/completions", `{"model":"sim-model"}`, 400, "prompt"},
		{"too long", "/v1/completions", `{"model":"sim-model","prompt":"x","max_tokens":9000}`, 400, "maximum context length is 8192"},
	}
	for _, tc := range cases {
		status, b := postJSON(t, c, s.URL()+tc.path, []byte(tc.body), nil)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, status, tc.status, b)
			continue
		}
		e := decodeError(t, b)
		if e.Error.Code != tc.status || !strings.Contains(e.Error.Message, tc.want) || e.Error.Type != errorType(tc.status) {
			t.Errorf("%s: error %+v, want code %d and a message with %q", tc.name, *e.Error, tc.status, tc.want)
		}
	}
	for _, r := range s.Records() {
		if r.Outcome != OutcomeError {
			t.Errorf("invalid request recorded as %+v", r)
		}
	}
}

func TestLegacyErrorShape(t *testing.T) {
	s := startSim(t, Config{LegacyErrors: true})
	status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", []byte(`{"model":"nope","messages":[{"role":"user","content":"x"}]}`), nil)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"object": "error", "message": "The model `nope` does not exist.", "type": "NotFoundError", "param": "model", "code": 404.0}
	if status != 404 || !reflect.DeepEqual(got, want) {
		t.Errorf("status %d, body %v, want %v", status, got, want)
	}
}

func TestLegacyErrorMidStream(t *testing.T) {
	s := startSim(t, Config{LegacyErrors: true})
	o := observe(testContext(t), newClient(t), faultRequest(t, s, "status:500@sent:0"), nil)
	if len(o.events) != 3 {
		t.Fatalf("events = %q", o.events)
	}
	got := decodeEvent(t, o.events[2])
	if got["object"] != "error" || got["code"] != 500.0 || got["type"] != "InternalServerError" {
		t.Errorf("mid-stream legacy error = %v", got)
	}
}

func TestUnknownPath(t *testing.T) {
	s := startSim(t, Config{})
	status, b := getBody(t, newClient(t), s.URL()+"/v2/nothing")
	if status != http.StatusNotFound || string(b) != `{"detail":"Not Found"}` {
		t.Errorf("status %d, body %s", status, b)
	}
}
