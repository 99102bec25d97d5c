package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMetricsCountNewEndpoints: Messages and Responses are chat requests
// to vLLM's engine and count as such; an embeddings request counts its
// inputs' prompt tokens and each input as a finished request.
func TestMetricsCountNewEndpoints(t *testing.T) {
	s := startSim(t, Config{})
	if status, _ := postMessages(t, s, messagesRequest("metrics", 3, nil), nil); status != 200 {
		t.Fatal(status)
	}
	req := newPost(t, testContext(t), s.URL()+"/v1/messages", jsonBody(t, messagesRequest("metrics", 2, map[string]any{"stream": true})), nil)
	if o := observeNamed(testContext(t), newClient(t), req, nil); o.err != nil {
		t.Fatal(o.err)
	}
	if status, _ := postResponses(t, s, map[string]any{"input": "metrics", "max_output_tokens": 4}, nil); status != 200 {
		t.Fatal(status)
	}
	req = newPost(t, testContext(t), s.URL()+"/v1/responses", jsonBody(t, map[string]any{"input": "metrics", "max_output_tokens": 5, "stream": true}), nil)
	if o := observeNamed(testContext(t), newClient(t), req, nil); o.err != nil {
		t.Fatal(o.err)
	}
	m := scrape(t, s)
	prompt := 0
	for _, r := range s.Records() {
		prompt += r.PromptTokens
	}
	if got := metricValue(t, m, "vllm:generation_tokens_total"); got != 3+2+4+5 {
		t.Errorf("generation tokens %v, want 14", got)
	}
	if got := metricValue(t, m, "vllm:prompt_tokens_total"); got != float64(prompt) {
		t.Errorf("prompt tokens %v, want %d", got, prompt)
	}
	if got := metricValue(t, m, "vllm:request_success_total", `finished_reason="length"`); got != 4 {
		t.Errorf("length finishes %v, want 4", got)
	}

	e := startSim(t, Config{Task: TaskEmbed, EmbeddingDim: 2})
	if status, _ := postEmbeddings(t, e, map[string]any{"input": []string{"one", "two three"}}, nil); status != 200 {
		t.Fatal(status)
	}
	m = scrape(t, e)
	if metricValue(t, m, "vllm:prompt_tokens_total") != 3 || metricValue(t, m, "vllm:generation_tokens_total") != 0 ||
		metricValue(t, m, "vllm:request_success_total", `finished_reason="stop"`) != 2 {
		t.Errorf("embedding metrics:\n%s", m)
	}
}

// TestWaitRecordSeesEveryEndpoint: a record exists while each endpoint's
// request runs, and ends as cancelled when its client leaves.
func TestWaitRecordSeesEveryEndpoint(t *testing.T) {
	gen := startSim(t, Config{DecodePerToken: time.Hour})
	emb := startSim(t, Config{Task: TaskEmbed, PrefillPerToken: time.Hour})
	cases := []struct {
		s        *Server
		endpoint string
		path     string
		body     any
	}{
		{gen, "chat", "/v1/chat/completions", chatRequest("wait", map[string]any{"stream": true})},
		{gen, "completions", "/v1/completions", map[string]any{"model": "sim-model", "prompt": "wait"}},
		{gen, "messages", "/v1/messages", messagesRequest("wait", 5, map[string]any{"stream": true})},
		{gen, "responses", "/v1/responses", map[string]any{"input": "wait", "stream": true}},
		{emb, "embeddings", "/v1/embeddings", map[string]any{"input": "wait"}},
	}
	for _, c := range cases {
		t.Run(c.endpoint, func(t *testing.T) {
			ctx, cancel := context.WithCancel(testContext(t))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := newClient(t).Do(newPost(t, ctx, c.s.URL()+c.path, jsonBody(t, c.body), nil))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			rec := waitRecord(t, c.s, func(r Record) bool { return r.Endpoint == c.endpoint && r.PromptTokens > 0 && r.Outcome == "" })
			cancel()
			wg.Wait()
			rec = waitRecord(t, c.s, func(r Record) bool { return r.ID == rec.ID && ended(r) })
			if rec.Outcome != OutcomeCancelled {
				t.Errorf("record = %+v", rec)
			}
		})
	}
	if got := metricValue(t, scrape(t, emb), "vllm:request_success_total", `finished_reason="abort"`); got != 1 {
		t.Errorf("embedding aborts %v, want 1", got)
	}
}

// TestArmedFaultsReachNewEndpoints: faults armed for the next requests
// apply whatever the endpoint, each rendered in its own shape.
func TestArmedFaultsReachNewEndpoints(t *testing.T) {
	s := startSim(t, Config{})
	if err := s.ArmFault("status:429@accept", 2); err != nil {
		t.Fatal(err)
	}
	status, body := postMessages(t, s, messagesRequest("armed", 3, nil), nil)
	if e := decodeAnthropicError(t, body); status != 429 || e.Error.Type != "TooManyRequestsError" {
		t.Errorf("messages: %d %s", status, body)
	}
	status, body = postResponses(t, s, map[string]any{"input": "armed"}, nil)
	if e := decodeError(t, body); status != 429 || e.Error.Code != 429 {
		t.Errorf("responses: %d %s", status, body)
	}
	if status, body := postMessages(t, s, messagesRequest("armed", 3, nil), nil); status != 200 {
		t.Errorf("after the armed count: %d %s", status, body)
	}
	for i, r := range s.Records() {
		if (r.Fault != "") != (i < 2) {
			t.Errorf("record %d = %+v", i, r)
		}
	}
}

func TestDropAndSlowOnNewEndpoints(t *testing.T) {
	s := startSim(t, Config{})
	_, err := newClient(t).Do(messagesFaultRequest(t, s, "drop@accept", false))
	if !errors.Is(err, io.EOF) {
		t.Errorf("drop@accept: %v, want EOF before any response", err)
	}
	if rec := s.Records()[0]; rec.Outcome != OutcomeDropped || rec.Endpoint != "messages" || rec.PromptTokens == 0 {
		t.Errorf("record = %+v", rec)
	}
	o := observeNamed(testContext(t), newClient(t), responsesFaultRequest(t, s, "slow:x3@prefill", true), nil)
	if o.err != nil || o.events[len(o.events)-1].name != "response.completed" {
		t.Errorf("slow: events %q, err %v", o.names(), o.err)
	}
	if rec := s.Records()[1]; rec.Outcome != OutcomeFinished || rec.TokensSent != 6 {
		t.Errorf("record = %+v", rec)
	}
	// The records' HTTP view names the endpoints as Records does.
	status, body := getBody(t, newClient(t), s.URL()+"/sim/requests")
	var recs []Record
	if status != http.StatusOK || json.Unmarshal(body, &recs) != nil || len(recs) != 2 || recs[0].Endpoint != "messages" || recs[1].Endpoint != "responses" {
		t.Errorf("/sim/requests: %d %s", status, body)
	}
}

func TestCLIDocumentsEndpoints(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POST /v1/chat/completions", "POST /v1/completions", "POST /v1/messages", "message_start",
		"POST /v1/responses", "GET  /v1/responses/{id}", "POST /v1/embeddings", "-task", "-enable-responses-store", "-embedding-dim",
		"/v1/messages       before the stream", "/v1/responses      errors in the OpenAI shape"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	cfg, err := parseFlags([]string{"--task", "embed", "--embedding-dim", "8", "--enable-responses-store"}, io.Discard)
	if err != nil || cfg.Task != TaskEmbed || cfg.EmbeddingDim != 8 || !cfg.EnableResponsesStore {
		t.Errorf("config %+v, err %v", cfg, err)
	}
	if _, err := Start(Config{Task: "rerank"}); err == nil {
		t.Error("Start accepted an unknown task")
	}
	if _, err := Start(Config{EmbeddingDim: -1}); err == nil {
		t.Error("Start accepted a negative EmbeddingDim")
	}
}

// TestBrokenWholeReplies: every endpoint's garbage reply is cut inside its
// JSON and its oversize reply is valid JSON of more than 4 MiB.
func TestBrokenWholeReplies(t *testing.T) {
	s := startSim(t, Config{})
	for _, endpoint := range []string{endpointChat, endpointCompletions, endpointMessages, endpointResponses, endpointEmbeddings} {
		g := &generation{s: s, id: "x-1", created: 1, spec: generationSpec{endpoint: endpoint, n: 1, prompts: []promptSpec{{key: "k", ids: []uint32{1}}}}}
		f := formatFor(endpoint)
		if b := f.garbageWhole(g); json.Valid(b) || !bytes.HasPrefix(b, []byte(`{"id":"x-1"`)) {
			t.Errorf("%s garbage %s", endpoint, b)
		}
		if b := f.oversizeWhole(g); !json.Valid(b) || len(b) <= 4<<20 {
			t.Errorf("%s oversize: %d bytes, valid %v", endpoint, len(b), json.Valid(b))
		}
	}
}
