package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/llamatest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// These tests put the gateway in front of llama.cpp's own server (llama-server, found
// through FENCEGATE_LLAMA_SERVER; see scripts/install-llama-server) serving the tiny model
// of internal/llamatest, whose answers are known words and always max_tokens long. Where
// the simulated replicas of the other tests speak vLLM's wire format, these check the
// contract against what a real engine sends, and against how it dies.

// llamaEnv is a gateway in front of real llama-server replicas, replica i in priority
// tier i, so the first one serves while it can.
type llamaEnv struct {
	*env
	engines []*llamatest.Server
	model   *llamatest.Model
}

const llamaSeed = 11

func newLlamaEnv(t *testing.T, n int, change func(*config.Config)) *llamaEnv {
	t.Helper()
	engines := llamatest.Start(t, n, llamatest.Options{Seed: llamaSeed})
	var reps []config.Replica
	for i, s := range engines {
		// No engine kind: the gateway tells llama.cpp from its metric names.
		reps = append(reps, config.Replica{Name: s.Name, URL: s.URL, Priority: i})
	}
	cfg := &config.Config{Models: []config.Model{{Name: llamatest.ModelName, Replicas: reps}}, Store: "memory:", AdminListen: "127.0.0.1:0"}
	if change != nil {
		change(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	e := &env{t: t, gw: gw, srv: h1servertest.NewServer(gw.Handler()), admin: h1servertest.NewServer(gw.AdminHandler())}
	t.Cleanup(func() {
		e.srv.Close()
		e.admin.Close()
		gw.Close()
	})
	e.client = openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return &llamaEnv{env: e, engines: engines, model: llamatest.NewModel(llamaSeed)}
}

// llamaAPI is one API of the gateway, spoken through its official Go SDK.
type llamaAPI struct {
	name string
	// stream streams an answer of maxTokens tokens to prompt, calling onText with every
	// piece of text as it arrives.
	stream func(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64, onText func(string)) apiResult
	// whole asks for the same answer without streaming.
	whole func(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64) apiResult
	// want is the tiny model's answer.
	want func(m *llamatest.Model, prompt string, n int) string
}

func chatReply(m *llamatest.Model, _ string, n int) string { return m.ChatReply(n) }

// llamaAPIs are the APIs llama-server answers that the gateway serves: chat and text
// completions, the Anthropic Messages API and the OpenAI Responses API (llama-server
// renders the last three through the model's chat template).
var llamaAPIs = []llamaAPI{
	{name: "chat", stream: llamaChatStream, whole: llamaChatWhole, want: chatReply},
	{name: "completions", stream: llamaCompletionsStream, whole: llamaCompletionsWhole,
		want: func(m *llamatest.Model, prompt string, n int) string { return m.Completion(prompt, n) }},
	{name: "messages", stream: llamaMessagesStream, whole: llamaMessagesWhole, want: chatReply},
	{name: "responses", stream: llamaResponsesStream, whole: llamaResponsesWhole, want: chatReply},
}

func llamaChatParams(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: llamatest.ModelName, MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
}

// sseCode reads the code of an SSE error event the OpenAI SDK raised.
func sseCode(r *apiResult) {
	if ev, ok := errorEvent(r.err); ok {
		r.code, _ = ev["code"].(string)
	}
	var apiErr *openai.Error
	if errors.As(r.err, &apiErr) {
		r.code = apiErr.Code
	}
}

func llamaChatStream(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64, onText func(string)) apiResult {
	var resp *http.Response
	s := e.client.Chat.Completions.NewStreaming(ctx, llamaChatParams(prompt, maxTokens), option.WithResponseInto(&resp))
	defer s.Close()
	var r apiResult
	for s.Next() {
		for _, c := range s.Current().Choices {
			if c.Delta.Content != "" {
				r.text += c.Delta.Content
				onText(c.Delta.Content)
			}
		}
	}
	r.err = s.Err()
	sseCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func llamaChatWhole(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64) apiResult {
	var resp *http.Response
	c, err := e.client.Chat.Completions.New(ctx, llamaChatParams(prompt, maxTokens), option.WithResponseInto(&resp))
	r := apiResult{err: err}
	if err == nil {
		r.text = c.Choices[0].Message.Content
	}
	sseCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func llamaCompletionParams(prompt string, maxTokens int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{Model: llamatest.ModelName, MaxTokens: openai.Int(maxTokens),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}}
}

func llamaCompletionsStream(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64, onText func(string)) apiResult {
	var resp *http.Response
	s := e.client.Completions.NewStreaming(ctx, llamaCompletionParams(prompt, maxTokens), option.WithResponseInto(&resp))
	defer s.Close()
	var r apiResult
	for s.Next() {
		for _, c := range s.Current().Choices {
			if c.Text != "" {
				r.text += c.Text
				onText(c.Text)
			}
		}
	}
	r.err = s.Err()
	sseCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func llamaCompletionsWhole(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64) apiResult {
	var resp *http.Response
	c, err := e.client.Completions.New(ctx, llamaCompletionParams(prompt, maxTokens), option.WithResponseInto(&resp))
	r := apiResult{err: err}
	if err == nil {
		r.text = c.Choices[0].Text
	}
	sseCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func (e *llamaEnv) anthropic() anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithBaseURL(e.srv.URL), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
}

func llamaMessageParams(prompt string, maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: llamatest.ModelName, MaxTokens: maxTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
}

// anthropicCode reads fencegate's code from an error the Anthropic SDK raised.
func anthropicCode(r *apiResult) {
	var apiErr *anthropic.Error
	if errors.As(r.err, &apiErr) {
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(apiErr.RawJSON()), &body)
		r.code = body.Error.Code
	}
}

func llamaMessagesStream(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64, onText func(string)) apiResult {
	var resp *http.Response
	c := e.anthropic()
	s := c.Messages.NewStreaming(ctx, llamaMessageParams(prompt, maxTokens), anthropicoption.WithResponseInto(&resp))
	defer s.Close()
	var r apiResult
	for s.Next() {
		if d, ok := s.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok && d.Delta.Text != "" {
			r.text += d.Delta.Text
			onText(d.Delta.Text)
		}
	}
	r.err = s.Err()
	anthropicCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func llamaMessagesWhole(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64) apiResult {
	var resp *http.Response
	c := e.anthropic()
	m, err := c.Messages.New(ctx, llamaMessageParams(prompt, maxTokens), anthropicoption.WithResponseInto(&resp))
	r := apiResult{err: err}
	if err == nil {
		for _, b := range m.Content {
			r.text += b.Text
		}
	}
	anthropicCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func llamaResponseParams(prompt string, maxTokens int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: llamatest.ModelName, MaxOutputTokens: openai.Int(maxTokens),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
}

func llamaResponsesStream(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64, onText func(string)) apiResult {
	var resp *http.Response
	s := e.client.Responses.NewStreaming(ctx, llamaResponseParams(prompt, maxTokens), option.WithResponseInto(&resp))
	defer s.Close()
	var r apiResult
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" && ev.Delta != "" {
			r.text += ev.Delta
			onText(ev.Delta)
		}
	}
	r.err = s.Err()
	var se *ssestream.StreamError
	if errors.As(r.err, &se) {
		var body struct {
			Code string `json:"code"`
		}
		json.Unmarshal(se.Event.Data, &body)
		r.code = body.Code
	}
	var apiErr *openai.Error
	if errors.As(r.err, &apiErr) {
		r.code = apiErr.Code
	}
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func llamaResponsesWhole(ctx context.Context, e *llamaEnv, prompt string, maxTokens int64) apiResult {
	var resp *http.Response
	out, err := e.client.Responses.New(ctx, llamaResponseParams(prompt, maxTokens), option.WithResponseInto(&resp))
	r := apiResult{err: err}
	if err == nil {
		r.text = out.OutputText()
	}
	sseCode(&r)
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func ignoreText(string) {}

// longAnswer is max_tokens for an answer a test acts on while it is generated: nearly a
// slot's whole context (4096 tokens with the prompt), which the engine takes seconds to
// write (about 2 ms a token near the end, on one thread) where the tests act within
// milliseconds of its first token.
const longAnswer = 4000

// engineWork is what an engine's counters say it has done: prompt tokens evaluated,
// decode calls (counted while a request runs, unlike the tokens predicted) and slots in
// use. A replica that never got a request reads all zero.
type engineWork struct {
	PromptTokens, Decodes, Predicted, Processing float64
}

func (e *llamaEnv) work(i int) engineWork {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := e.engines[i].Metrics(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return engineWork{PromptTokens: m["llamacpp:prompt_tokens_total"], Decodes: m["llamacpp:n_decode_total"],
		Predicted: m["llamacpp:tokens_predicted_total"], Processing: m["llamacpp:requests_processing"]}
}

// A healthy answer on each API, whole and streamed: the tiny model's words, exactly
// max_tokens of them, from the first replica, and a journal that counts them. (Each API
// has replicas of its own, and the stream comes last: a request that follows a stream on
// the same replica may meet the gap TestLlamacppBackToBackStreams describes.)
func TestLlamacppHealthy(t *testing.T) {
	for _, api := range llamaAPIs {
		t.Run(api.name, func(t *testing.T) {
			e := newLlamaEnv(t, 2, nil)
			const prompt, n = "tell me a story", 9
			want := api.want(e.model, prompt, n)
			for _, mode := range []string{"whole", "stream"} {
				var r apiResult
				if mode == "whole" {
					r = api.whole(testCtx(t), e, prompt, n)
				} else {
					r = api.stream(testCtx(t), e, prompt, n, ignoreText)
				}
				if r.err != nil {
					t.Fatalf("%s: %v", mode, r.err)
				}
				if r.text != want {
					t.Fatalf("%s: got %q, want %q", mode, r.text, want)
				}
				rec := e.record(r.requestID)
				if rec.Outcome != "completed" || rec.DeliveredOutputTokens != n || len(rec.Attempts) != 1 || rec.Attempts[0].Replica != "llama-1" {
					t.Fatalf("%s: journal %+v", mode, rec)
				}
			}
			if w := e.work(1); w != (engineWork{}) {
				t.Fatalf("the second replica worked: %+v", w)
			}
		})
	}
}

// A replica whose process was killed before the request: the dial is refused and the
// request runs on the other replica, whose answer the client gets whole.
func TestLlamacppRerunAfterKill(t *testing.T) {
	for _, api := range llamaAPIs {
		t.Run(api.name, func(t *testing.T) {
			e := newLlamaEnv(t, 2, nil)
			e.engines[0].Kill()
			const prompt, n = "rerun me", 7
			r := api.stream(testCtx(t), e, prompt, n, ignoreText)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if want := api.want(e.model, prompt, n); r.text != want {
				t.Fatalf("got %q, want %q", r.text, want)
			}
			rec := e.record(r.requestID)
			if rec.Outcome != "completed" || rec.DeliveredOutputTokens != n || len(rec.Attempts) != 2 ||
				rec.Attempts[0].Replica != "llama-1" || rec.Attempts[0].EndReason != "connection_refused" ||
				rec.Attempts[1].Replica != "llama-2" {
				t.Fatalf("journal %+v", rec)
			}
		})
	}
}

// A replica that dies while it holds the request, before any output (frozen with
// SIGSTOP, then killed: the kernel resets the connection it never read): the request is
// rerun on the other replica and the client, which saw only keepalives, gets its answer.
func TestLlamacppRerunWhenKilledHoldingRequest(t *testing.T) {
	e := newLlamaEnv(t, 2, func(c *config.Config) { c.Policy.Keepalive = config.Duration(200 * time.Millisecond) })
	if err := e.engines[0].Freeze(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.srv.URL+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":6,"messages":[{"role":"user","content":"hold me"}]}`, llamatest.ModelName)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The headers come with the first keepalive, 200 ms after the attempt started: by then
	// its request (a loopback connect and write, which the frozen process's kernel
	// accepts) waits unread on the frozen replica.
	e.engines[0].Kill()
	text, done := readChatSSE(t, resp)
	if want := e.model.ChatReply(6); text != want || !done {
		t.Fatalf("got %q (done %v), want %q", text, done, want)
	}
	rec := e.record(resp.Header.Get("X-Request-Id"))
	if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[0].Replica != "llama-1" || rec.Attempts[1].Replica != "llama-2" {
		t.Fatalf("journal %+v", rec)
	}
	if r := rec.Attempts[0].EndReason; r != "connection_reset" && r != "connection_closed" {
		t.Fatalf("first attempt ended %q", r)
	}
}

// readChatSSE reads a chat stream to its end: the text, and whether it ended with [DONE].
func readChatSSE(t *testing.T, resp *http.Response) (string, bool) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	done := false
	_, data := sseData(b)
	for _, ev := range data {
		if ev == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
		}
	}
	return text, done
}

// A replica killed after the first delta: the client's SDK raises one native
// interruption after a prefix of the answer, the journal counts what was delivered, and
// the other replica did no work at all (its counters are still zero).
func TestLlamacppInterruptedAfterFirstDelta(t *testing.T) {
	for _, api := range llamaAPIs {
		t.Run(api.name, func(t *testing.T) {
			e := newLlamaEnv(t, 2, nil)
			// A long answer: the replica is still generating it (seconds) when it dies, a
			// few milliseconds after its first word reached the client.
			const prompt, n = "a very long story", longAnswer
			killed := false
			r := api.stream(testCtx(t), e, prompt, n, func(string) {
				if !killed {
					killed = true
					e.engines[0].Kill()
				}
			})
			if r.err == nil || r.code != "upstream_decode_interrupted" {
				t.Fatalf("client saw %d bytes, error %v (code %q)", len(r.text), r.err, r.code)
			}
			want := api.want(e.model, prompt, n)
			if r.text == "" || r.text == want || !strings.HasPrefix(want, r.text) {
				t.Fatalf("client saw %q, not a proper prefix of the answer", r.text)
			}
			rec := e.record(r.requestID)
			if rec.Outcome != "interrupted" || len(rec.Attempts) != 1 || rec.Attempts[0].Replica != "llama-1" ||
				rec.DeliveredOutputTokens != len(strings.Fields(r.text)) {
				t.Fatalf("journal %+v, client got %d words", rec, len(strings.Fields(r.text)))
			}
			if w := e.work(1); w != (engineWork{}) {
				t.Fatalf("the other replica worked: %+v", w)
			}
		})
	}
}

// A client that leaves mid-answer: the gateway cancels the engine request at once, and
// llama-server frees the slot it held (its /slots says so); nothing is rerun.
func TestLlamacppClientLeavesFreesSlot(t *testing.T) {
	for _, api := range llamaAPIs {
		t.Run(api.name, func(t *testing.T) {
			e := newLlamaEnv(t, 2, nil)
			ctx, cancel := context.WithCancel(testCtx(t))
			busy := -1
			r := api.stream(ctx, e, "a long story to leave", longAnswer, func(string) {
				if busy < 0 {
					var err error
					if busy, err = e.engines[0].Busy(testCtx(t)); err != nil {
						t.Error(err)
					}
					cancel()
				}
			})
			if busy != 1 {
				t.Fatalf("%d slots busy while the answer streamed", busy)
			}
			if r.err == nil {
				t.Fatal("the stream went on after the client left")
			}
			if _, err := e.engines[0].WaitSlots(testCtx(t), func(busy int) bool { return busy == 0 }); err != nil {
				t.Fatal(err)
			}
			if rec := e.record(r.requestID); rec.Outcome != "cancelled" || len(rec.Attempts) != 1 || !rec.Attempts[0].CancelSent {
				t.Fatalf("journal %+v", rec)
			}
			if w := e.work(1); w != (engineWork{}) {
				t.Fatalf("the other replica worked: %+v", w)
			}
		})
	}
}

// A replica that hangs (frozen with SIGSTOP) before its first token: without an agent the
// gateway cannot prove it stopped, so after first_token_timeout the client gets
// upstream_unresponsive, marked retryable, and nothing runs on the other replica.
func TestLlamacppHangBeforeOutput(t *testing.T) {
	for _, api := range llamaAPIs {
		t.Run(api.name, func(t *testing.T) {
			e := newLlamaEnv(t, 2, func(c *config.Config) { c.Policy.FirstTokenTimeout = config.Duration(500 * time.Millisecond) })
			if err := e.engines[0].Freeze(); err != nil {
				t.Fatal(err)
			}
			r := api.stream(testCtx(t), e, "hang before you answer", 5, ignoreText)
			if r.code != "upstream_unresponsive" || r.text != "" {
				t.Fatalf("client saw %q, error %v (code %q)", r.text, r.err, r.code)
			}
			rec := e.record(r.requestID)
			if rec.Outcome != "failed" || len(rec.Attempts) != 1 || rec.Attempts[0].EndReason != "first_token_timeout" || rec.Attempts[0].Failure != "uncertain" {
				t.Fatalf("journal %+v", rec)
			}
			if w := e.work(1); w != (engineWork{}) {
				t.Fatalf("the other replica worked: %+v", w)
			}
		})
	}
}

// A replica that hangs after the first delta: the interruption comes at idle_timeout,
// after the prefix the client already has; the other replica does nothing.
func TestLlamacppHangAfterFirstDelta(t *testing.T) {
	for _, api := range llamaAPIs {
		t.Run(api.name, func(t *testing.T) {
			e := newLlamaEnv(t, 2, func(c *config.Config) { c.Policy.IdleTimeout = config.Duration(500 * time.Millisecond) })
			const prompt, n = "hang in the middle", longAnswer
			frozen := false
			r := api.stream(testCtx(t), e, prompt, n, func(string) {
				if !frozen {
					frozen = true
					if err := e.engines[0].Freeze(); err != nil {
						t.Error(err)
					}
				}
			})
			if r.code != "upstream_decode_interrupted" {
				t.Fatalf("error %v (code %q)", r.err, r.code)
			}
			if want := api.want(e.model, prompt, n); r.text == "" || !strings.HasPrefix(want, r.text) {
				t.Fatalf("client saw %q, not a prefix of the answer", r.text)
			}
			rec := e.record(r.requestID)
			if rec.Outcome != "interrupted" || len(rec.Attempts) != 1 || rec.Attempts[0].EndReason != "idle_timeout" ||
				rec.DeliveredOutputTokens != len(strings.Fields(r.text)) {
				t.Fatalf("journal %+v", rec)
			}
			if w := e.work(1); w != (engineWork{}) {
				t.Fatalf("the other replica worked: %+v", w)
			}
		})
	}
}

// holdSlots sends n long streaming requests straight to an engine and reads nothing of
// them: llama-server generates regardless, so each holds a slot (or waits for one) for
// seconds. The returned function ends them (the test's end does too).
func holdSlots(t *testing.T, s *llamatest.Server, n int) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/completions",
				strings.NewReader(fmt.Sprintf(`{"prompt":"hold","max_tokens":%d,"stream":true}`, longAnswer)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			<-ctx.Done()
			resp.Body.Close()
		}()
	}
	release = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(release)
	return release
}

// readyReplica is a replica's line in /readyz.
type readyReplica struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Running int    `json:"engine_running"`
	Waiting int    `json:"engine_waiting"`
}

// refresh asks the gateway to scrape every replica now and returns what it read.
func (e *llamaEnv) refresh() map[string]readyReplica {
	e.t.Helper()
	resp, err := http.Post(e.admin.URL+"/admin/refresh", "application/json", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Pools []struct {
			Replicas []readyReplica `json:"replicas"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]readyReplica{}
	for _, r := range body.Pools[0].Replicas {
		out[r.Name] = r
	}
	return out
}

// Load comes from llama.cpp's own metrics: slots in use are running requests, tasks
// waiting for a slot are queued ones. The gateway routes a new request to the less loaded
// replica, keeps new work off one whose queue is at max_queue, and sheds when every
// replica's is.
func TestLlamacppLoadFromMetrics(t *testing.T) {
	e := newLlamaEnv(t, 2, func(c *config.Config) {
		c.Models[0].Replicas[1].Priority = 0 // one tier: the less loaded replica serves
		c.Models[0].MaxQueue = 1
		// No queue in the gateway: the engines' own, at max_queue, make the pool shed
		// (TestLlamacppSlotsQueueInTheGateway has the queue).
		c.Models[0].Queue.MaxLen = -1
	})
	ctx := testCtx(t)
	// Both slots of llama-1 busy, nothing waiting.
	release1 := holdSlots(t, e.engines[0], 2)
	if _, err := e.engines[0].WaitSlots(ctx, func(busy int) bool { return busy == 2 }); err != nil {
		t.Fatal(err)
	}
	status := e.refresh()
	if s := status["llama-1"]; s.Running != 2 || s.Waiting != 0 || s.State != "healthy" {
		t.Fatalf("llama-1 %+v", s)
	}
	if s := status["llama-2"]; s.Running != 0 || s.Waiting != 0 || s.State != "healthy" {
		t.Fatalf("llama-2 %+v", s)
	}
	// Without the engine's numbers the two would tie and the first would serve.
	r := llamaChatStream(ctx, e, "route me", 4, ignoreText)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if rec := e.record(r.requestID); rec.Attempts[0].Replica != "llama-2" {
		t.Fatalf("routed to %s while llama-1 reported its slots busy", rec.Attempts[0].Replica)
	}
	// A third request waits for a slot of llama-1: its queue is at max_queue.
	release1b := holdSlots(t, e.engines[0], 1)
	if _, err := e.engines[0].WaitMetric(ctx, "llamacpp:requests_deferred", func(v float64) bool { return v == 1 }); err != nil {
		t.Fatal(err)
	}
	if s := e.refresh()["llama-1"]; s.Running != 2 || s.Waiting != 1 || s.State != "overloaded" {
		t.Fatalf("llama-1 %+v", s)
	}
	// And llama-2's too: the pool sheds.
	release2 := holdSlots(t, e.engines[1], 3)
	if _, err := e.engines[1].WaitMetric(ctx, "llamacpp:requests_deferred", func(v float64) bool { return v == 1 }); err != nil {
		t.Fatal(err)
	}
	if s := e.refresh()["llama-2"]; s.Running != 2 || s.Waiting != 1 || s.State != "overloaded" {
		t.Fatalf("llama-2 %+v", s)
	}
	_, err := e.client.Chat.Completions.New(ctx, llamaChatParams("shed me", 4))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "pool_overloaded" {
		t.Fatalf("with every queue full: %v", err)
	}
	release1()
	release1b()
	release2()
	for _, s := range e.engines {
		if _, err := s.WaitSlots(ctx, func(busy int) bool { return busy == 0 }); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range e.refresh() {
		if s.Running != 0 || s.Waiting != 0 || s.State != "healthy" {
			t.Fatalf("%s after the load left: %+v", name, s)
		}
	}
}

// Errors llama-server reports are normalised into each API's own error shape with a
// string code, and not rerun (the other replica would refuse the same input).
func TestLlamacppEngineErrors(t *testing.T) {
	e := newLlamaEnv(t, 2, nil)
	// Every byte of a prompt is a token of the tiny model: 5000 bytes do not fit a slot's
	// 4096 tokens.
	long := strings.Repeat("too long ", 560)
	for _, api := range llamaAPIs {
		t.Run(api.name+"/context", func(t *testing.T) {
			for mode, r := range map[string]apiResult{
				"stream": api.stream(testCtx(t), e, long, 5, ignoreText),
				"whole":  api.whole(testCtx(t), e, long, 5),
			} {
				if r.err == nil || r.code != "context_length_exceeded" || r.text != "" {
					t.Fatalf("%s: error %v (code %q)", mode, r.err, r.code)
				}
				if rec := e.record(r.requestID); rec.Outcome != "failed" || len(rec.Attempts) != 1 || rec.Attempts[0].Failure != "rejected" {
					t.Fatalf("%s: journal %+v", mode, rec)
				}
			}
		})
	}
	t.Run("raw", func(t *testing.T) {
		// The body as the client reads it: OpenAI's shape, a string code, fencegate's
		// request id; the engine's integer code and extra fields are gone.
		for name, tc := range map[string]struct {
			path, body, code string
		}{
			"context": {"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":%q}]}`, llamatest.ModelName, long), "context_length_exceeded"},
			// Parameters the gateway passes on and llama-server refuses: a mistyped one, a
			// grammar its sampler cannot parse, more choices than it has slots.
			"bad seed":    {"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_tokens":5,"seed":"x","messages":[{"role":"user","content":"hi"}]}`, llamatest.ModelName), "invalid_request"},
			"bad grammar": {"/v1/completions", fmt.Sprintf(`{"model":%q,"max_tokens":5,"grammar":"root ::= (","prompt":"hi"}`, llamatest.ModelName), "invalid_request"},
			"n > slots":   {"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_tokens":5,"n":3,"messages":[{"role":"user","content":"hi"}]}`, llamatest.ModelName), "invalid_request"},
		} {
			resp, err := http.Post(e.srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]map[string]any
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			eo := body["error"]
			if resp.StatusCode != http.StatusBadRequest || eo["code"] != tc.code || eo["type"] != "invalid_request_error" ||
				eo["request_id"] != resp.Header.Get("X-Request-Id") || eo["message"] == "" || eo["n_ctx"] != nil {
				t.Errorf("%s: %d %v", name, resp.StatusCode, body)
			}
		}
	})
	if w := e.work(1); w != (engineWork{}) {
		t.Fatalf("the second replica worked: %+v", w)
	}
}

// llama-server answers a completions prompt array (and n > 1) with every choice; the
// gateway completes the stream only once all of them finished, and counts every token.
// llama-server sends a "data: null" event between the choices of one prompt and the
// next; the gateway drops it, since it is no chunk (the official Node SDK fails on it).
func TestLlamacppPromptArrayStream(t *testing.T) {
	e := newLlamaEnv(t, 2, nil)
	id, raw := postRaw(t, e.srv.URL+"/v1/completions", fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":3,"n":2,"prompt":["first","second"]}`, llamatest.ModelName))
	_, data := sseData([]byte(raw))
	text := map[int]string{}
	finished := map[int]string{}
	for _, ev := range data {
		var c struct {
			Choices []struct {
				Index        int    `json:"index"`
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if ev == "[DONE]" || json.Unmarshal([]byte(ev), &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			text[ch.Index] += ch.Text
			if ch.FinishReason != "" {
				finished[ch.Index] = ch.FinishReason
			}
		}
	}
	want := map[int]string{0: e.model.Completion("first", 3), 1: e.model.Completion("first", 3),
		2: e.model.Completion("second", 3), 3: e.model.Completion("second", 3)}
	for i, w := range want {
		if text[i] != w || finished[i] != "length" {
			t.Fatalf("choice %d: %q (%q), want %q; stream %s", i, text[i], finished[i], w, raw)
		}
	}
	if !strings.HasSuffix(raw, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]: %s", raw)
	}
	if rec := e.record(id); rec.Outcome != "completed" || rec.DeliveredOutputTokens != 12 {
		t.Fatalf("journal %+v", rec)
	}
	if slices.Contains(data, "null") {
		t.Fatalf("the gateway forwarded llama-server's \"data: null\": %s", raw)
	}
}

// A whole answer with several choices: the client gets every choice, and the journal
// counts what the engine's usage says, the count the client was given too. A whole
// answer's tokens are known only from its usage, and llama-server's usage of such an
// answer counts one choice's tokens (completion_tokens 4 for two choices of 4; see
// internal/sim/testdata/llamacpp/README.md): the journal cannot know better, and
// docs/design.md §6 says so. A streamed answer is counted per delta (8 here).
func TestLlamacppWholeSeveralChoicesCount(t *testing.T) {
	e := newLlamaEnv(t, 2, nil)
	p := llamaChatParams("two answers", 4)
	p.N = openai.Int(2)
	var resp *http.Response
	c, err := e.client.Chat.Completions.New(testCtx(t), p, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	want := e.model.ChatReply(4)
	if len(c.Choices) != 2 || c.Choices[0].Message.Content != want || c.Choices[1].Message.Content != want {
		t.Fatalf("choices %+v", c.Choices)
	}
	rec := e.record(resp.Header.Get("X-Request-Id"))
	if rec.Outcome != "completed" || rec.DeliveredOutputTokens != int(c.Usage.CompletionTokens) {
		t.Fatalf("journal %+v, the client's usage counts %d tokens", rec, c.Usage.CompletionTokens)
	}
}

// postRaw posts body and returns the request id and the whole response body.
func postRaw(t *testing.T, url, body string) (string, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Get("X-Request-Id"), string(b)
}

// Streams back to back on one replica: every one completes, on its first attempt.
// llama-server closes the connection after every streamed answer although its headers
// offer keep-alive ("Keep-Alive: timeout=5, max=100", no "Connection: close"), so a
// request that took the pooled connection before the engine's close was read would fail
// without a byte of an answer (and, with one replica, reach its client as a 502). The
// gateway knows the engine's kind (here from its metric names) and sends its streams with
// "Connection: close", so no such connection is reused.
func TestLlamacppBackToBackStreams(t *testing.T) {
	e := newLlamaEnv(t, 1, nil)
	const n = 60
	var ids []string
	for range n {
		// No pause between them: the next request goes out as soon as the previous
		// stream's last byte is read, as under load.
		id, _ := postRaw(t, e.srv.URL+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":3,"messages":[{"role":"user","content":"again"}]}`, llamatest.ModelName))
		ids = append(ids, id)
	}
	for i, id := range ids {
		if rec := e.record(id); rec.Outcome != "completed" || len(rec.Attempts) != 1 {
			t.Fatalf("stream %d of %d: journal %+v", i+1, n, rec)
		}
	}
}

// llama.cpp says how many requests it decodes at once (/props: total_slots, two here):
// without max_outstanding, that is each replica's capacity, and a flood of six streams on
// one replica waits in the gateway's fair queue for a slot rather than in the engine's
// FIFO, and completes.
func TestLlamacppSlotsQueueInTheGateway(t *testing.T) {
	e := newLlamaEnv(t, 1, nil)
	e.refresh()
	ctx := testCtx(t)
	results := make(chan apiResult, 6)
	for i := range 6 {
		go func() { results <- llamaChatStream(ctx, e, fmt.Sprintf("flood %d", i), 8, ignoreText) }()
	}
	for range 6 {
		if r := <-results; r.err != nil {
			t.Fatal(r.err)
		}
	}
	m := e.metrics()
	if !strings.Contains(m, `fencegate_queue_ended_total{end="dequeued",model="`+llamatest.ModelName+`",priority="0"}`) {
		t.Fatalf("no stream waited in the gateway's queue:\n%s", grepLines(m, "fencegate_queue"))
	}
}
