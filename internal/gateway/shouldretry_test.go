package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/errorsdoc"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// shouldRetryCase makes the gateway answer one error for real and returns that answer.
type shouldRetryCase struct {
	code string
	env  envOptions
	do   func(t *testing.T, e *env) *http.Response
}

const (
	retryKey      = "sk-should-retry-test"
	slowPrompt    = "a long answer that is still running"
	slowMaxTokens = 400
)

// slowReplicas decode slowly, so that a request is still running when the next arrives.
func slowReplicas(i int, c *sim.Config) { c.DecodePerToken = 20 * time.Millisecond }

func withKeys(keys ...config.APIKey) func(*config.Config) {
	return func(c *config.Config) { c.Auth = config.Auth{Keys: keys} }
}

// runningStream starts a streamed request and returns once its replica sent output; the
// request runs until the test ends.
func runningStream(t *testing.T, e *env, body string, headers ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	readUntilContent(t, resp)
}

func getURL(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var shouldRetryCases = []shouldRetryCase{
	{code: "invalid_json", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", `{"model":`)
	}},
	{code: "unsupported_media_type", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "Content-Type", "text/plain")
	}},
	{code: "request_too_large", env: envOptions{config: func(c *config.Config) { c.Limits.MaxBodyBytes = 1024 }}, do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody(strings.Repeat("long ", 300), 2))
	}},
	{code: "model_not_found", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", strings.Replace(streamBody("x", 2), "sim-model", "no-such-model", 1))
	}},
	{code: "unknown_url", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/no-such-thing", `{}`)
	}},
	{code: "method_not_allowed", do: func(t *testing.T, e *env) *http.Response {
		return getURL(t, e.srv.URL+"/v1/chat/completions")
	}},
	{code: "invalid_api_key", env: envOptions{config: withKeys(config.APIKey{ID: "team", Key: retryKey})}, do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2))
	}},
	{code: "request_not_found", do: func(t *testing.T, e *env) *http.Response {
		return getURL(t, e.srv.URL+"/v1/requests/req_unknown")
	}},
	{code: "invalid_value", do: func(t *testing.T, e *env) *http.Response {
		return getURL(t, e.srv.URL+"/v1/requests/req_unknown?wait=soon")
	}},
	{code: "invalid_idempotency_key", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", strings.Repeat("k", 256))
	}},
	{code: "idempotency_key_reused", do: func(t *testing.T, e *env) *http.Response {
		first := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-reused")
		readAll(t, first)
		e.record(first.Header.Get("X-Request-Id"))
		return post(t, e.srv.URL+"/v1/chat/completions", strings.Replace(keyedBody, "keyed", "another", 1), "Idempotency-Key", "k-reused")
	}},
	{code: "idempotency_key_in_use", env: envOptions{sim: slowReplicas}, do: func(t *testing.T, e *env) *http.Response {
		body := streamBody(slowPrompt, slowMaxTokens)
		runningStream(t, e, body, "Idempotency-Key", "k-in-use")
		return post(t, e.srv.URL+"/v1/chat/completions", body, "Idempotency-Key", "k-in-use")
	}},
	{code: "idempotency_key_cancelled", env: envOptions{sim: slowReplicas}, do: func(t *testing.T, e *env) *http.Response {
		body := streamBody(slowPrompt, slowMaxTokens)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k-cancelled")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readUntilContent(t, resp)
		cancel()
		resp.Body.Close()
		e.record(resp.Header.Get("X-Request-Id"))
		return post(t, e.srv.URL+"/v1/chat/completions", body, "Idempotency-Key", "k-cancelled")
	}},
	{code: "upstream_decode_interrupted", do: func(t *testing.T, e *env) *http.Response {
		// The 502 a keyed request's retry gets after its interruption.
		first := post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-interrupted", "X-Sim-Fault", "reset@sent:1")
		readAll(t, first)
		e.record(first.Header.Get("X-Request-Id"))
		return post(t, e.srv.URL+"/v1/chat/completions", keyedBody, "Idempotency-Key", "k-interrupted")
	}},
	{code: "no_healthy_replica", env: envOptions{config: func(c *config.Config) {
		for i := range c.Models[0].Replicas {
			c.Models[0].Replicas[i].URL = "http://127.0.0.1:1" // nothing listens: the dial is refused
		}
	}}, do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2))
	}},
	{code: "engine_error", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "status:500@accept")
	}},
	{code: "engine_overloaded", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "status:503@accept")
	}},
	{code: "upstream_unavailable", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "reset@accept")
	}},
	{code: "invalid_request", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "status:400@accept")
	}},
	{code: "upstream_protocol_error", do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "garbage@prefill")
	}},
	{code: "upstream_unresponsive", env: envOptions{config: func(c *config.Config) {
		c.Policy.FirstTokenTimeout = config.Duration(200 * time.Millisecond)
	}}, do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "hang@prefill")
	}},
	{code: "request_timeout", env: envOptions{config: func(c *config.Config) {
		c.Policy.MaxRequestDuration = config.Duration(200 * time.Millisecond)
	}}, do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "hang@prefill")
	}},
	{code: "rerun_too_expensive", env: envOptions{config: func(c *config.Config) { c.Policy.MaxRerunPrefillTokens = 1 }}, do: func(t *testing.T, e *env) *http.Response {
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "X-Sim-Fault", "reset@prefill")
	}},
	{code: "pool_overloaded", env: envOptions{sim: slowReplicas, config: func(c *config.Config) { c.Models[0].MaxOutstanding, c.Models[0].Queue.MaxLen = 1, -1 }}, do: func(t *testing.T, e *env) *http.Response {
		runningStream(t, e, streamBody(slowPrompt, slowMaxTokens))
		runningStream(t, e, streamBody(slowPrompt+" too", slowMaxTokens))
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2))
	}},
	{code: "queue_full", env: envOptions{sim: slowReplicas, config: func(c *config.Config) {
		c.Models[0].MaxOutstanding, c.Models[0].Queue.MaxLen = 1, 1
		c.Policy.Keepalive = config.Duration(10 * time.Millisecond)
	}}, do: func(t *testing.T, e *env) *http.Response {
		runningStream(t, e, streamBody(slowPrompt, slowMaxTokens))
		runningStream(t, e, streamBody(slowPrompt+" too", slowMaxTokens))
		waiting, err := http.Post(e.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody("waits", 2)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { waiting.Body.Close() }) // its headers came with its first keepalive: it waits
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2))
	}},
	{code: "queue_timeout", env: envOptions{sim: slowReplicas, config: func(c *config.Config) {
		c.Models[0].MaxOutstanding, c.Models[0].Queue.MaxWait = 1, config.Duration(50*time.Millisecond)
	}}, do: func(t *testing.T, e *env) *http.Response {
		runningStream(t, e, streamBody(slowPrompt, slowMaxTokens))
		runningStream(t, e, streamBody(slowPrompt+" too", slowMaxTokens))
		return post(t, e.srv.URL+"/v1/chat/completions", chatFor("sim-model", 2))
	}},
	{code: "rate_limit_exceeded", env: envOptions{config: withKeys(config.APIKey{ID: "team", Key: retryKey, RPM: 1})}, do: func(t *testing.T, e *env) *http.Response {
		readAll(t, post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "Authorization", "Bearer "+retryKey))
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "Authorization", "Bearer "+retryKey)
	}},
	{code: "concurrency_limit_exceeded", env: envOptions{sim: slowReplicas, config: withKeys(config.APIKey{ID: "team", Key: retryKey, MaxConcurrent: 1})}, do: func(t *testing.T, e *env) *http.Response {
		runningStream(t, e, streamBody(slowPrompt, slowMaxTokens), "Authorization", "Bearer "+retryKey)
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2), "Authorization", "Bearer "+retryKey)
	}},
	{code: "gateway_shutting_down", do: func(t *testing.T, e *env) *http.Response {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.gw.Drain(ctx)
		return post(t, e.srv.URL+"/v1/chat/completions", streamBody("x", 2))
	}},
}

// Every error the gateway answers with a status carries the x-should-retry that
// docs/errors.md gives its code, made for real: a gateway and simulated replicas on
// loopback, each error caused as a client or an engine would cause it.
func TestShouldRetryHeaderFollowsErrorsDoc(t *testing.T) {
	doc, err := errorsdoc.Stances()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range shouldRetryCases {
		t.Run(tc.code, func(t *testing.T) {
			want, ok := doc[tc.code]
			if !ok {
				t.Fatalf("%s is not in docs/errors.md", tc.code)
			}
			e := newEnv(t, tc.env)
			resp := tc.do(t, e)
			body := readAll(t, resp)
			if got := gjson.Get(body, "error.code").String(); got != tc.code {
				t.Fatalf("answer %d %s, want the code %s", resp.StatusCode, body, tc.code)
			}
			if got := resp.Header.Get("X-Should-Retry"); got != want.Value {
				t.Errorf("%s (%d): x-should-retry %q, docs/errors.md says %q:\n%s", tc.code, resp.StatusCode, got, want.Value, want.Row)
			}
		})
	}
}

// countingTransport counts the requests a client sends.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// The official OpenAI Go SDK obeys the header: it sends again an error the gateway marks
// x-should-retry: true (a 502 upstream_unavailable) and never one marked false (a 409
// idempotency_key_cancelled, which its own policy would resend).
func TestSDKObeysShouldRetry(t *testing.T) {
	e := newEnv(t, envOptions{sim: slowReplicas})
	count := &countingTransport{}
	client := openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1"), option.WithAPIKey("unused"),
		option.WithHTTPClient(&http.Client{Transport: count}), option.WithMaxRetries(1))

	_, err := client.Chat.Completions.New(testCtx(t), chatParams("x", 2), option.WithHeader("X-Sim-Fault", "reset@accept"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "upstream_unavailable" {
		t.Fatalf("error %v", err)
	}
	if n := count.n.Load(); n != 2 {
		t.Fatalf("the SDK sent %d requests for a retryable 502, want 2 (MaxRetries 1)", n)
	}

	// A keyed request cancelled when its client left.
	ctx, cancel := context.WithCancel(testCtx(t))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(streamBody(slowPrompt, slowMaxTokens)))
	req.Header.Set("Idempotency-Key", "k-sdk")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readUntilContent(t, resp)
	cancel()
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	e.record(resp.Header.Get("X-Request-Id"))

	count.n.Store(0)
	_, err = client.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{}, option.WithRequestBody("application/json", []byte(streamBody(slowPrompt, slowMaxTokens))),
		option.WithHeader("Idempotency-Key", "k-sdk"))
	if !errors.As(err, &apiErr) || apiErr.Code != "idempotency_key_cancelled" {
		t.Fatalf("error %v", err)
	}
	if n := count.n.Load(); n != 1 {
		t.Fatalf("the SDK sent %d requests for idempotency_key_cancelled, want 1", n)
	}
}
